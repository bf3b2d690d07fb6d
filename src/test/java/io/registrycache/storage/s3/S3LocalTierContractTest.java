package io.registrycache.storage.s3;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import io.registrycache.config.ContentScope;
import io.registrycache.config.RegistryCacheProperties;
import io.registrycache.oci.Digest;
import io.registrycache.storage.StorageLayout;
import io.registrycache.storage.StoredContent;
import io.registrycache.testsupport.S3Settings;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Clock;
import java.time.Duration;
import java.util.Arrays;
import java.util.Map;
import java.util.stream.Stream;
import org.assertj.core.api.Assertions;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.springframework.core.io.buffer.DataBufferFactory;
import org.springframework.core.io.buffer.DefaultDataBuffer;
import org.springframework.core.io.buffer.DefaultDataBufferFactory;
import org.springframework.util.unit.DataSize;

/**
 * The {@link io.registrycache.storage.BlobStoreContract} and the S3 store's own tests again with
 * the local disk tier on ({@code storage.s3.local-tier-size}), plus what the tier adds: fills and
 * blobs read from the bucket end up as verified local files, served as files; an object that does
 * not match its digest never does; the tier stays within its size; copies leave with the blob and
 * survive a restart. s3proxy in the test JVM, nothing mocked.
 */
class S3LocalTierContractTest extends S3BlobStoreContractTest {

  private static final Duration WAIT = Duration.ofSeconds(20);

  @Override
  protected DataSize localTierSize() {
    return DataSize.ofMegabytes(64);
  }

  private S3LocalTier tier() throws Exception {
    return ((S3BlobStore) store()).localTier().orElseThrow();
  }

  /** Another replica on the same bucket, without a tier. */
  private S3BlobStore otherReplica(Path root) throws Exception {
    S3StorageProperties plain =
        S3Settings.from(properties).localTierSize(DataSize.ofBytes(0)).build();
    return new S3BlobStore(
        objects,
        new StorageLayout(
            RegistryCacheProperties.bind(Map.of("registry-cache.storage.path", root.toString()))),
        Clock.systemUTC(),
        Duration.ZERO,
        ContentScope.REPOSITORY,
        plain);
  }

  private S3BlobStore storeWithTier(Path root, DataSize tierSize) throws Exception {
    S3StorageProperties small = S3Settings.from(properties).localTierSize(tierSize).build();
    return new S3BlobStore(
        objects,
        new StorageLayout(
            RegistryCacheProperties.bind(Map.of("registry-cache.storage.path", root.toString()))),
        Clock.systemUTC(),
        Duration.ZERO,
        ContentScope.REPOSITORY,
        small);
  }

  private static long filesUnder(Path dir) throws Exception {
    if (!Files.isDirectory(dir)) {
      return 0;
    }
    try (Stream<Path> files = Files.walk(dir)) {
      return files.filter(Files::isRegularFile).count();
    }
  }

  /**
   * With the tier the blob is read from its local file, not the object: an allocation failure
   * reaches the reader as itself, synchronously, and the blob still reads whole afterwards.
   */
  @Override
  @Test
  void aReadThatCannotGetBuffersFailsInsteadOfHanging() throws Exception {
    byte[] content = random(200_000, 26);
    Digest digest = Digest.sha256(content);
    write(store().newWriter(digest), content);
    DataBufferFactory exhausted =
        new DefaultDataBufferFactory() {
          @Override
          public DefaultDataBuffer allocateBuffer(int initialCapacity) {
            throw new OutOfMemoryError(
                "failed to allocate " + initialCapacity + " byte(s) of direct memory");
          }
        };
    StoredContent stored = store().open(digest).orElseThrow();
    assertThat(stored.file()).as("served from the local tier").isPresent();
    Assertions.assertThatThrownBy(
            () -> stored.read(0, content.length, exhausted).blockLast(Duration.ofSeconds(20)))
        .as("the allocation failure itself, not a blocking-read timeout")
        .isInstanceOf(OutOfMemoryError.class);
    assertThat(read(store().open(digest).orElseThrow(), 0, content.length)).isEqualTo(content);
  }

  @Test
  void aFilledBlobIsServedAsALocalFileOnceCommitted() throws Exception {
    byte[] content = random(2 * PART + 7, 31);
    Digest digest = Digest.sha256(content);
    write(store().newWriter(digest), content);

    StoredContent stored = store().open(digest).orElseThrow();
    assertThat(stored.file()).as("served from the local tier").hasValue(layout.blob(digest));
    assertThat(Files.readAllBytes(stored.file().get())).isEqualTo(content);
    assertThat(read(stored, 5, 100)).isEqualTo(Arrays.copyOfRange(content, 5, 105));
    assertThat(tier().bytes()).isEqualTo(content.length);
  }

  @Test
  void aBlobAnotherReplicaStoredIsServedFromTheBucketFirstThenFromAVerifiedLocalCopy(
      @TempDir Path otherRoot) throws Exception {
    byte[] content = random(300_000, 33);
    Digest digest = Digest.sha256(content);
    store(); // started before the other replica stores the blob
    try (S3BlobStore other = otherReplica(otherRoot)) {
      write(other.newWriter(digest), content);
    }
    assertThat(store().recheck(digest).block()).isTrue();

    StoredContent first = store().open(digest).orElseThrow();
    assertThat(first.file()).as("no copy yet: the object, streamed").isEmpty();
    assertThat(read(first, 0, content.length)).isEqualTo(content);
    await().atMost(WAIT).until(() -> store().open(digest).orElseThrow().file().isPresent());
    assertThat(Files.readAllBytes(layout.blob(digest))).isEqualTo(content);
    assertThat(filesUnder(layout.tmpRoot())).as("no temporary file left").isZero();
  }

  @Test
  void anObjectThatDoesNotMatchItsDigestIsNeverCopiedOrServedFromTheTier() throws Exception {
    byte[] content = random(50_000, 35);
    Digest digest = Digest.sha256(content);
    store();
    byte[] tampered = content.clone();
    tampered[1000] ^= 1;
    objects
        .putBytes(S3BlobStore.key(digest), tampered)
        .block(); // a bucket that lies: same size, other bytes
    assertThat(store().recheck(digest).block()).isTrue();

    assertThat(store().open(digest).orElseThrow().file()).isEmpty();
    await().atMost(WAIT).until(() -> tier().rejected() == 1);
    assertThat(store().open(digest).orElseThrow().file()).isEmpty();
    assertThat(Files.exists(layout.blob(digest))).isFalse();
    assertThat(tier().count()).isZero();
    await().atMost(WAIT).until(() -> filesUnder(layout.tmpRoot()) == 0);
  }

  @Test
  void theTierStaysWithinItsSizeAndDeletesWhatItEvicts(@TempDir Path smallRoot) throws Exception {
    try (S3BlobStore small = storeWithTier(smallRoot, DataSize.ofKilobytes(100))) {
      S3LocalTier tier = small.localTier().orElseThrow();
      for (int i = 0; i < 6; i++) {
        byte[] content = random(40 * 1024, 40 + i);
        write(small.newWriter(Digest.sha256(content)), content);
        assertThat(tier.bytes()).as("after blob %d", i).isLessThanOrEqualTo(100 * 1024);
      }
      assertThat(tier.count()).isBetween(1L, 2L);
      assertThat(small.count()).as("every blob is still in the bucket").isEqualTo(6);
      Path blobs = smallRoot.resolve("blobs");
      await().atMost(WAIT).until(() -> filesUnder(blobs) == tier.count());
      byte[] big = random(200 * 1024, 50);
      write(small.newWriter(Digest.sha256(big)), big);
      assertThat(small.open(Digest.sha256(big)).orElseThrow().file())
          .as("larger than the tier")
          .isEmpty();
      assertThat(read(small.open(Digest.sha256(big)).orElseThrow(), 0, big.length)).isEqualTo(big);
    }
  }

  @Test
  void anEvictedBlobLeavesTheTierAndItsFileGoes() throws Exception {
    byte[] content = random(10_000, 37);
    Digest digest = Digest.sha256(content);
    write(store().newWriter(digest), content);
    assertThat(Files.exists(layout.blob(digest))).isTrue();

    store().evict(digest, Long.MAX_VALUE);
    assertThat(store().open(digest)).isEmpty();
    await().atMost(WAIT).until(() -> !Files.exists(layout.blob(digest)));
    assertThat(tier().count()).isZero();
  }

  @Test
  void copiesSurviveARestartAndStrayFilesDoNot() throws Exception {
    byte[] content = random(10_000, 39);
    Digest digest = Digest.sha256(content);
    write(store().newWriter(digest), content);
    Digest stray = Digest.sha256(random(10, 41));
    Files.createDirectories(layout.blob(stray).getParent());
    Files.write(layout.blob(stray), random(10, 41)); // not in the bucket

    reopen();
    assertThat(store().open(digest).orElseThrow().file())
        .as("no download needed")
        .hasValue(layout.blob(digest));
    assertThat(Files.exists(layout.blob(stray))).isFalse();
  }

  /**
   * With the tier, a copy keeps serving verified bytes until the index learns the object is gone.
   */
  @Override
  void aBlobRemovedByAnotherReplicaFailsOneReadAndLeavesTheIndex() {}

  @Test
  void aBlobRemovedByAnotherReplicaLeavesTheTierAtTheNextIndexRefresh() throws Exception {
    byte[] content = random(20_000, 43);
    Digest digest = Digest.sha256(content);
    write(store().newWriter(digest), content);
    objects.delete(S3BlobStore.key(digest)).block(); // another replica evicted it
    assertThat(read(store().open(digest).orElseThrow(), 0, content.length))
        .as("the verified copy")
        .isEqualTo(content);

    store().rescan();
    assertThat(store().open(digest)).isEmpty();
    await().atMost(WAIT).until(() -> !Files.exists(layout.blob(digest)));
  }
}
