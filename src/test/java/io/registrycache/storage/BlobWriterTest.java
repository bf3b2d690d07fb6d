package io.registrycache.storage;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.registrycache.oci.Digest;
import io.registrycache.oci.ManifestContent;
import io.registrycache.oci.MediaType;
import io.registrycache.oci.OciErrorCode;
import io.registrycache.testsupport.TestCache;
import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.ByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.time.Duration;
import java.util.Arrays;
import java.util.Random;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.Executor;
import java.util.concurrent.TimeUnit;
import java.util.stream.Stream;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.springframework.core.io.buffer.DataBufferUtils;
import org.springframework.core.io.buffer.DefaultDataBufferFactory;

/** The store's write seam: verification lives in commit, so no caller can store wrong bytes. */
class BlobWriterTest {

  @TempDir Path root;
  private TestCache cache;

  private TestCache cache() {
    if (cache == null) {
      cache = new TestCache(root, 0, Duration.ZERO);
    }
    return cache;
  }

  @AfterEach
  void close() {
    if (cache != null) {
      cache.close();
    }
  }

  private static byte[] random(int size, long seed) {
    byte[] b = new byte[size];
    new Random(seed).nextBytes(b);
    return b;
  }

  private long tmpFiles() throws IOException {
    try (Stream<Path> s = Files.list(root.resolve("tmp"))) {
      return s.count();
    }
  }

  @Test
  void committedBytesAreStoredUnderTheirDigestAndAReaderKeepsReadingThem() throws IOException {
    FileBlobStore blobs = cache().blobs;
    byte[] content = random(100_000, 1);
    Digest digest = Digest.sha256(content);
    BlobWriter writer = (BlobWriter) blobs.newWriter(digest); // a file-system writer reads its file
    writer.append(ByteBuffer.wrap(content, 0, 40_000));
    try (FileChannel early = writer.openReader()) {
      writer.append(ByteBuffer.wrap(content, 40_000, content.length - 40_000));
      assertThat(blobs.size(digest)).as("not visible before the commit").isEmpty();
      assertThat(writer.commit(content.length)).isEqualTo(content.length);
      ByteBuffer all = ByteBuffer.allocate(content.length);
      while (all.hasRemaining() && early.read(all, all.position()) > 0) {
        // a reader opened before the commit reads the same file after it
      }
      assertThat(all.array()).isEqualTo(content);
    }
    assertThat(blobs.lookup(digest)).contains((long) content.length);
    assertThat(Files.readAllBytes(blobs.path(digest))).isEqualTo(content);
    assertThat(tmpFiles()).isZero();
  }

  /**
   * A sink whose store step renames the file (as the file system store does), then waits to be
   * released.
   */
  private static final class HeldStore implements BlobSink {
    final CountDownLatch renamed = new CountDownLatch(1);
    final CountDownLatch release = new CountDownLatch(1);
    final boolean renameFirst;
    final Path target;

    HeldStore(Path target, boolean renameFirst) {
      this.target = target;
      this.renameFirst = renameFirst;
    }

    @Override
    public Path store(Path temp, long size) throws IOException {
      Path at = temp;
      if (renameFirst) {
        Files.move(temp, target, StandardCopyOption.ATOMIC_MOVE);
        at = target;
      }
      renamed.countDown();
      try {
        release.await(); // an fsync, an object-store upload, an index update
      } catch (InterruptedException e) {
        throw new IOException(e);
      }
      return at;
    }

    @Override
    public void closed(boolean stored) {}
  }

  private static byte[] readAll(FileChannel channel, int size) throws IOException {
    ByteBuffer b = ByteBuffer.allocate(size);
    while (b.hasRemaining() && channel.read(b, b.position()) > 0) {
      // positional reads until full
    }
    return b.array();
  }

  /**
   * A thread of its own per task: on JDK 25 the default async pool is the common pool even with a
   * parallelism of 1 (2 cores), where a reader would queue behind a held commit.
   */
  private static final Executor THREAD_PER_TASK = task -> Thread.ofPlatform().start(task);

  /** {@code writer.commit(size)} on another thread. */
  private static CompletableFuture<Long> commitLater(BlobWriter writer, long size) {
    return CompletableFuture.supplyAsync(
        () -> {
          try {
            return writer.commit(size);
          } catch (IOException e) {
            throw new UncheckedIOException(e);
          }
        },
        THREAD_PER_TASK);
  }

  /** Opens a reader of {@code writer} and reads {@code size} bytes, on another thread. */
  private static CompletableFuture<byte[]> readLater(BlobWriter writer, int size) {
    return CompletableFuture.supplyAsync(
        () -> {
          try (FileChannel in = writer.openReader()) {
            return readAll(in, size);
          } catch (IOException e) {
            throw new UncheckedIOException(e);
          }
        },
        THREAD_PER_TASK);
  }

  @Test
  void aReaderOpensWhileTheStoreStepRunsWithoutWaitingForIt() throws Exception {
    byte[] content = random(50_000, 7);
    Digest digest = Digest.sha256(content);
    Files.createDirectories(root.resolve("w"));
    HeldStore store = new HeldStore(root.resolve("w/stored"), false);
    BlobWriter writer = new BlobWriter(digest, root.resolve("w/temp"), store);
    writer.append(ByteBuffer.wrap(content));
    var commit = commitLater(writer, content.length);
    assertThat(store.renamed.await(10, TimeUnit.SECONDS)).isTrue();
    // Before the fix the open waited on the commit's lock until the store step ended.
    var open = readLater(writer, content.length);
    try {
      assertThat(open.get(10, TimeUnit.SECONDS)).isEqualTo(content);
      assertThat(commit).isNotDone();
    } finally {
      store.release.countDown();
    }
    assertThat(commit.get(10, TimeUnit.SECONDS)).isEqualTo(content.length);
  }

  @Test
  void aReaderOpeningRightAfterTheStoreMovedTheFileOpensItWhereItWent() throws Exception {
    byte[] content = random(50_000, 8);
    Digest digest = Digest.sha256(content);
    Files.createDirectories(root.resolve("w"));
    HeldStore store = new HeldStore(root.resolve("w/stored"), true);
    BlobWriter writer = new BlobWriter(digest, root.resolve("w/temp"), store);
    writer.append(ByteBuffer.wrap(content));
    var commit = commitLater(writer, content.length);
    assertThat(store.renamed.await(10, TimeUnit.SECONDS)).isTrue();
    var open = readLater(writer, content.length);
    // temp is gone and the store has not said where the file went yet: the open waits for it.
    store.release.countDown();
    assertThat(open.get(10, TimeUnit.SECONDS)).isEqualTo(content);
    assertThat(commit.get(10, TimeUnit.SECONDS)).isEqualTo(content.length);
  }

  @Test
  void wrongDigestOrSizeIsRejectedInCommitAndNothingIsKept() throws IOException {
    FileBlobStore blobs = cache().blobs;
    byte[] content = random(10_000, 2);
    Digest claimed = Digest.sha256(random(10_000, 3));
    ContentWriter lying = blobs.newWriter(claimed);
    lying.append(ByteBuffer.wrap(content));
    assertThatThrownBy(() -> lying.commit(content.length))
        .isInstanceOfSatisfying(
            ContentVerificationException.class,
            e -> assertThat(e.code()).isEqualTo(OciErrorCode.DIGEST_INVALID));
    assertThat(blobs.size(claimed)).isEmpty();
    assertThat(blobs.path(claimed)).doesNotExist();
    assertThatThrownBy(lying::openReader).isInstanceOf(IOException.class);

    Digest real = Digest.sha256(content);
    ContentWriter shortened = blobs.newWriter(real);
    shortened.append(ByteBuffer.wrap(content));
    assertThatThrownBy(() -> shortened.commit(content.length + 1))
        .isInstanceOf(ContentVerificationException.class);
    assertThat(blobs.size(real)).isEmpty();
    assertThat(tmpFiles()).isZero();
  }

  @Test
  void abortLeavesTheStoreUnchanged() throws IOException {
    FileBlobStore blobs = cache().blobs;
    byte[] content = random(5_000, 4);
    Digest digest = Digest.sha256(content);
    ContentWriter writer = blobs.newWriter(digest);
    writer.append(ByteBuffer.wrap(content));
    writer.abort();
    writer.abort(); // idempotent
    assertThat(blobs.size(digest)).isEmpty();
    assertThat(tmpFiles()).isZero();
  }

  @Test
  void aManifestWhoseBytesDoNotMatchItsDigestIsNotStored() {
    ManifestStore manifests = cache().manifests;
    byte[] body = "{\"schemaVersion\":2}".getBytes(StandardCharsets.UTF_8);
    Digest other = Digest.sha256("something else".getBytes(StandardCharsets.UTF_8));
    assertThatThrownBy(
            () ->
                manifests.put(
                    new StoredManifest(
                        other,
                        MediaType.parse("application/vnd.oci.image.manifest.v1+json"),
                        body)))
        .isInstanceOf(ContentVerificationException.class);
    assertThat(manifests.find(other)).isEmpty();
    assertThat(manifests.count()).isZero();
  }

  @Test
  void aManifestIsVerifiedWhenMadeAndStoredWithTheReferencesItsFetchParsed() {
    ManifestStore manifests = cache().manifests;
    MediaType type = MediaType.parse("application/vnd.oci.image.manifest.v1+json");
    byte[] body = "{\"schemaVersion\":2,\"layers\":[]}".getBytes(StandardCharsets.UTF_8);
    Digest digest = Digest.sha256(body);
    byte[] shortened = Arrays.copyOf(body, body.length - 1);
    assertThatThrownBy(() -> new StoredManifest(digest, type, shortened))
        .isInstanceOf(ContentVerificationException.class);

    ManifestContent parsed = ManifestContent.parse(body, type);
    manifests.put(new StoredManifest(digest, type, body), parsed);
    assertThat(manifests.find(digest))
        .hasValueSatisfying(m -> assertThat(m.body()).isEqualTo(body));
    assertThat(manifests.content(digest)).contains(parsed);
  }

  @Test
  void storedContentReadsWholeOrARangeAndNamesItsFile() throws IOException {
    FileBlobStore blobs = cache().blobs;
    byte[] content = new byte[200_000];
    new Random(11).nextBytes(content);
    Digest digest = Digest.sha256(content);
    ContentWriter writer = blobs.newWriter(digest);
    writer.append(ByteBuffer.wrap(content));
    writer.commit(content.length);

    StoredContent stored = blobs.open(digest).orElseThrow();
    assertThat(stored.size()).isEqualTo(content.length);
    assertThat(stored.file()).contains(blobs.path(digest));
    assertThat(read(stored, 0, content.length)).isEqualTo(content);
    assertThat(read(stored, 70_000, 65_537))
        .isEqualTo(Arrays.copyOfRange(content, 70_000, 135_537));
    assertThat(blobs.open(Digest.sha256(new byte[1]))).isEmpty();
  }

  private static byte[] read(StoredContent content, long start, long count) {
    ByteArrayOutputStream out = new ByteArrayOutputStream();
    content
        .read(start, count, DefaultDataBufferFactory.sharedInstance)
        .doOnNext(
            b -> {
              byte[] chunk = new byte[b.readableByteCount()];
              b.read(chunk);
              out.writeBytes(chunk);
              DataBufferUtils.release(b);
            })
        .blockLast(Duration.ofSeconds(10));
    return out.toByteArray();
  }

  @Test
  void aReservationThatDoesNotFitTheVolumeIsRefusedAsNoSpaceLeftAndOneThatFitsIsTaken()
      throws IOException {
    ContentWriter writer = cache().blobs.newWriter(Digest.sha256(new byte[] {1}));
    writer.reserve(1);
    writer.reserve(-1); // size unknown
    assertThatThrownBy(() -> writer.reserve(Long.MAX_VALUE))
        .isInstanceOf(IOException.class)
        .hasMessageContaining("No space left on device");
    writer.reserve(1);
    writer.abort();
  }

  /** A volume whose usable space and clock the test sets, counting the measurements. */
  private static final class FakeVolume {
    long free;
    long nanos;
    int measurements;
    final BlobWriter.Volume volume =
        new BlobWriter.Volume(
            () -> {
              measurements++;
              return free;
            },
            () -> nanos);
  }

  @Test
  void smallReservationsUseARecentMeasurementAndSubtractWhatTheyTook() throws IOException {
    FakeVolume v = new FakeVolume();
    v.free = 64_000;
    assertThat(v.volume.take(100)).isEqualTo(-1);
    assertThat(v.measurements).as("the first reservation measures").isEqualTo(1);
    for (int i = 0; i < 9; i++) {
      assertThat(v.volume.take(100)).isEqualTo(-1);
    }
    assertThat(v.measurements)
        .as("1,000 bytes taken of the 1/64 (1,000 bytes) that need no new measurement")
        .isEqualTo(1);
    assertThat(v.volume.take(1)).isEqualTo(-1);
    assertThat(v.measurements).as("beyond 1/64 of the measured space: measured again").isEqualTo(2);
    assertThat(v.volume.take(1)).isEqualTo(-1);
    assertThat(v.measurements).isEqualTo(2);
    v.nanos += BlobWriter.Volume.FRESH_NANOS;
    assertThat(v.volume.take(1)).isEqualTo(-1);
    assertThat(v.measurements).as("a measurement 1 s old is not used").isEqualTo(3);
  }

  @Test
  void aLargeReservationIsMeasuredAndARefusalAlwaysRestsOnAMeasurementMadeForIt()
      throws IOException {
    FakeVolume v = new FakeVolume();
    v.free = 6_400_000;
    assertThat(v.volume.take(1)).isEqualTo(-1);
    v.free = 50; // the volume filled up meanwhile, by something else
    assertThat(v.volume.take(1_000_000))
        .as("more than 1/64 of the last figure: measured, refused")
        .isEqualTo(50);
    assertThat(v.measurements).isEqualTo(2);
    v.free = 6_400_000; // freed again
    assertThat(v.volume.take(1_000))
        .as("after a refusal the next one measures again")
        .isEqualTo(-1);
    assertThat(v.measurements).isEqualTo(3);
    v.free = 100;
    assertThat(v.volume.take(6_400_000)).isEqualTo(100);
    assertThat(v.volume.take(101)).isEqualTo(100);
    assertThat(v.volume.take(100)).as("exactly what is free fits").isEqualTo(-1);
    assertThat(v.measurements).isEqualTo(6);
    assertThat(v.volume.take(-1)).as("an unknown size is not checked").isEqualTo(-1);
    assertThat(v.measurements).isEqualTo(6);
  }
}
