package io.registrycache.storage.s3;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.registrycache.config.ContentScope;
import io.registrycache.config.RegistryCacheProperties;
import io.registrycache.oci.Digest;
import io.registrycache.storage.BlobStore;
import io.registrycache.storage.BlobStoreContract;
import io.registrycache.storage.ContentVerificationException;
import io.registrycache.storage.ContentWriter;
import io.registrycache.storage.StorageLayout;
import io.registrycache.storage.StoredContent;
import io.registrycache.testsupport.S3TestServer;
import java.nio.ByteBuffer;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Clock;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.RegisterExtension;
import org.junit.jupiter.api.io.TempDir;
import org.springframework.core.io.buffer.DataBufferFactory;
import org.springframework.core.io.buffer.DefaultDataBuffer;
import org.springframework.core.io.buffer.DefaultDataBufferFactory;
import org.springframework.util.unit.DataSize;

/**
 * The {@link BlobStoreContract} on an S3-API object store: {@link S3BlobStore} against s3proxy in
 * the test JVM (signature v4, loopback HTTP, multipart uploads with 5 MiB parts), nothing mocked.
 */
class S3BlobStoreContractTest extends BlobStoreContract {

  static final String BUCKET = "registry-cache-contract";

  @RegisterExtension final S3TestServer s3 = S3TestServer.eachTest(BUCKET);

  @TempDir Path root;
  protected S3Objects objects;
  protected S3StorageProperties properties;
  protected StorageLayout layout;

  @BeforeEach
  void openObjects() {
    properties =
        s3.settings().partSize(DataSize.ofBytes(PART)).localTierSize(localTierSize()).build();
    objects = S3Objects.create(properties);
  }

  /** The clock of the store under test. */
  private Clock clock = Clock.systemUTC();

  /** {@code storage.s3.local-tier-size} of the store under test: off here. */
  protected DataSize localTierSize() {
    return DataSize.ofBytes(0);
  }

  @AfterEach
  void closeObjects() {
    if (store != null) {
      store.close();
      store = null;
    }
    objects.close();
  }

  @Override
  protected BlobStore openStore() throws Exception {
    RegistryCacheProperties cache =
        RegistryCacheProperties.bind(Map.of("registry-cache.storage.path", root.toString()));
    layout = new StorageLayout(cache);
    return new S3BlobStore(
        objects, layout, clock, Duration.ZERO, ContentScope.REPOSITORY, properties);
  }

  @Override
  protected boolean presentAtFinalLocation(Digest digest) {
    return objects.stat(S3BlobStore.key(digest)).block(Duration.ofSeconds(30)).isPresent();
  }

  @Override
  protected long writesInProgress() {
    return objects.uploadsInProgress("").count().block(Duration.ofSeconds(30));
  }

  @Test
  void partsGoUpWhileTheFillRunsAndTheObjectAppearsOnlyAtTheCommit() throws Exception {
    byte[] content = random(2 * PART + 1, 21);
    Digest digest = Digest.sha256(content);
    ContentWriter w = store().newWriter(digest);
    w.append(ByteBuffer.wrap(content, 0, 2 * PART));
    assertThat(writesInProgress()).as("a multipart upload is open during the fill").isEqualTo(1);
    assertThat(presentAtFinalLocation(digest)).isFalse();
    w.append(ByteBuffer.wrap(content, 2 * PART, 1));
    w.commit(content.length);
    assertThat(writesInProgress()).isZero();
    assertThat(objects.stat(S3BlobStore.key(digest)).block())
        .hasValueSatisfying(i -> assertThat(i.size()).isEqualTo(content.length));
    assertThat(S3BlobStore.key(digest)).isEqualTo("blobs/sha256/" + digest.hex());
  }

  @Test
  void aFillBehindAnOwnerUploadsNothingWhenTheOwnersObjectIsThereAtTheCommit() throws Exception {
    byte[] content = random(2 * PART + 1, 31);
    Digest digest = Digest.sha256(content);
    S3BlobStore s3Store = (S3BlobStore) store();
    ContentWriter w = s3Store.newWriter(digest, true, null, null);
    w.append(ByteBuffer.wrap(content, 0, 2 * PART));
    assertThat(writesInProgress()).as("no upload while the owner stores the same bytes").isZero();
    // The owner's upload completes (as another replica's commit would).
    Path ownersFile = Files.write(root.resolve("owners-copy"), content);
    objects
        .putFile(S3BlobStore.key(digest), ownersFile, 0, content.length)
        .block(Duration.ofSeconds(30));
    w.append(ByteBuffer.wrap(content, 2 * PART, 1));
    w.commit(content.length);
    assertThat(s3Store.uploadsSkipped()).isEqualTo(1);
    assertThat(s3Store.uploadsBehindOwner()).isZero();
    assertThat(writesInProgress()).isZero();
    assertThat(store().lookup(digest))
        .as("indexed as any stored blob")
        .contains((long) content.length);
    assertThat(read(store().open(digest).orElseThrow(), 0, content.length)).isEqualTo(content);
  }

  @Test
  void aFillBehindAnOwnerWhoseObjectNeverAppearsUploadsItsOwnVerifiedCopy() throws Exception {
    byte[] content = random(2 * PART + 1, 33);
    Digest digest = Digest.sha256(content);
    S3BlobStore s3Store = (S3BlobStore) store();
    // four looks 100 ms apart instead of the production waits (about 4 s): the same path, sooner
    s3Store.ownerCopyWaits(
        List.of(
            Duration.ZERO, Duration.ofMillis(100), Duration.ofMillis(100), Duration.ofMillis(100)));
    ContentWriter w = s3Store.newWriter(digest, true, null, null);
    w.append(ByteBuffer.wrap(content, 0, 2 * PART));
    assertThat(writesInProgress()).isZero();
    w.append(ByteBuffer.wrap(content, 2 * PART, 1));
    w.commit(content.length); // waits for the owner's object (the waits above), then uploads
    assertThat(s3Store.uploadsBehindOwner()).isEqualTo(1);
    assertThat(s3Store.uploadsSkipped()).isZero();
    assertThat(objects.stat(S3BlobStore.key(digest)).block())
        .hasValueSatisfying(i -> assertThat(i.size()).isEqualTo(content.length));
    assertThat(writesInProgress()).isZero();
  }

  @Test
  void aFillWhoseOwnerGaveUpUploadsAsAPlainFillWithoutWaiting() throws Exception {
    byte[] content = random(2 * PART + 1, 37);
    Digest digest = Digest.sha256(content);
    S3BlobStore s3Store = (S3BlobStore) store();
    ContentWriter w = s3Store.newWriter(digest, true, null, null);
    w.append(ByteBuffer.wrap(content, 0, PART + 10));
    assertThat(writesInProgress()).isZero();
    w.ownerGaveUp(); // e.g. the owner's body broke off: the rest comes from the upstream here
    w.append(ByteBuffer.wrap(content, PART + 10, PART - 20));
    assertThat(writesInProgress()).as("the parts so far go up at the next append").isEqualTo(1);
    w.append(ByteBuffer.wrap(content, 2 * PART - 10, content.length - (2 * PART - 10)));
    w.commit(content.length);
    assertThat(s3Store.uploadsSkipped()).isZero();
    assertThat(s3Store.uploadsBehindOwner()).as("no wait for an owner's copy").isZero();
    assertThat(objects.stat(S3BlobStore.key(digest)).block())
        .hasValueSatisfying(i -> assertThat(i.size()).isEqualTo(content.length));
    assertThat(read(store().open(digest).orElseThrow(), 0, content.length)).isEqualTo(content);
  }

  @Test
  void aFillBehindAnOwnerWithTheWrongBytesLeavesNothing() throws Exception {
    byte[] content = random(PART + 7, 35);
    Digest claimed = Digest.sha256(random(PART + 7, 36));
    ContentWriter w = store().newWriter(claimed, true, null, null);
    w.append(ByteBuffer.wrap(content));
    assertThatThrownBy(() -> w.commit(content.length))
        .isInstanceOf(ContentVerificationException.class);
    assertThat(presentAtFinalLocation(claimed)).isFalse();
    assertThat(writesInProgress()).isZero();
  }

  @Test
  void aFillOfMorePartsThanMayBeInFlightIsStoredWhole() throws Exception {
    int size = (S3BlobStore.MAX_PARTS_IN_FLIGHT + 2) * PART + 5;
    byte[] content = random(size, 23);
    Digest digest = Digest.sha256(content);
    assertThat(write(store().newWriter(digest), content)).isEqualTo(size);
    assertThat(writesInProgress()).isZero();
    assertThat(read(store().open(digest).orElseThrow(), 0, size)).isEqualTo(content);
  }

  @Test
  void aReadThatCannotGetBuffersFailsInsteadOfHanging() throws Exception {
    byte[] content = random(200_000, 26);
    Digest digest = Digest.sha256(content);
    write(store().newWriter(digest), content);
    // a factory past Netty's direct-memory limit, as in the chaos soak: every allocation fails
    DataBufferFactory exhausted =
        new DefaultDataBufferFactory() {
          @Override
          public DefaultDataBuffer allocateBuffer(int initialCapacity) {
            throw new OutOfMemoryError(
                "failed to allocate " + initialCapacity + " byte(s) of direct memory");
          }
        };
    StoredContent stored = store().open(digest).orElseThrow();

    assertThatThrownBy(
            () -> stored.read(0, content.length, exhausted).blockLast(Duration.ofSeconds(20)))
        .as("the response fails with the cause, not a blocking-read timeout")
        .hasRootCauseInstanceOf(OutOfMemoryError.class)
        .hasMessageContaining("no memory for the response's buffers");
    assertThat(read(store().open(digest).orElseThrow(), 0, content.length)).isEqualTo(content);
  }

  @Test
  void aBlobRemovedByAnotherReplicaFailsOneReadAndLeavesTheIndex() throws Exception {
    byte[] content = random(20_000, 25);
    Digest digest = Digest.sha256(content);
    write(store().newWriter(digest), content);
    StoredContent stored = store().open(digest).orElseThrow();
    objects.delete(S3BlobStore.key(digest)).block(); // another replica evicted it

    assertThatThrownBy(() -> read(stored, 0, content.length)).isNotNull();
    assertThat(store().lookup(digest)).as("a miss now: the next request fills it again").isEmpty();
    assertThat(store().bytes()).isZero();
    write(store().newWriter(digest), content);
    assertThat(read(store().open(digest).orElseThrow(), 0, content.length)).isEqualTo(content);
  }

  @Test
  void anIndexRefreshSeesWhatAnotherReplicaStoredAndRemoved(@TempDir Path otherRoot)
      throws Exception {
    RegistryCacheProperties cache =
        RegistryCacheProperties.bind(Map.of("registry-cache.storage.path", otherRoot.toString()));
    try (S3BlobStore other =
        new S3BlobStore(
            objects,
            new StorageLayout(cache),
            Clock.systemUTC(),
            Duration.ZERO,
            ContentScope.REPOSITORY,
            properties)) {
      byte[] content = random(30_000, 27);
      Digest digest = Digest.sha256(content);
      write(store().newWriter(digest), content);
      assertThat(other.lookup(digest))
          .as("stored by another replica after this one started")
          .isEmpty();

      assertThat(other.rescan()).isEqualTo(1);
      assertThat(other.lookup(digest)).contains((long) content.length);
      assertThat(other.bytes()).isEqualTo(content.length);
      assertThat(other.rescan()).as("nothing new").isZero();

      store().evict(digest, Long.MAX_VALUE); // no delete grace: the object goes now
      assertThat(other.rescan()).isEqualTo(1);
      assertThat(other.lookup(digest)).isEmpty();
      assertThat(other.bytes()).isZero();
    }
  }

  @Test
  void aLinkAnotherReplicaMadeAfterStartUpIsFoundByARecheck(@TempDir Path otherRoot)
      throws Exception {
    byte[] content = random(1_000, 29);
    Digest digest = Digest.sha256(content);
    write(store().newWriter(digest), content);
    RegistryCacheProperties cache =
        RegistryCacheProperties.bind(Map.of("registry-cache.storage.path", otherRoot.toString()));
    try (S3BlobStore other =
        new S3BlobStore(
            objects,
            new StorageLayout(cache),
            Clock.systemUTC(),
            Duration.ZERO,
            ContentScope.REPOSITORY,
            properties)) {
      store()
          .links()
          .link(digest, "upstream.example", "team/app"); // after the other replica started
      assertThat(other.links().servable(digest, "upstream.example", "team/app")).isFalse();

      assertThat(other.links().recheck(digest, "upstream.example", "team/other"))
          .as("another repository")
          .isFalse();
      assertThat(other.links().recheck(digest, "other.example", "team/app"))
          .as("another upstream")
          .isFalse();
      assertThat(other.links().recheck(digest, "upstream.example", "team/app")).isTrue();
      assertThat(other.links().servable(digest, "upstream.example", "team/app"))
          .as("kept in memory")
          .isTrue();
    }
  }

  @Test
  void uploadsOfAKilledReplicaAreAbortedAtStartUp() throws Exception {
    S3Objects.Upload abandoned = objects.startUpload("blobs/sha256/" + "ab".repeat(32)).block();
    assertThat(writesInProgress()).isEqualTo(1);
    properties =
        s3.settings()
            .partSize(DataSize.ofBytes(PART))
            .abandonedUploadAge(Duration.ofMinutes(1))
            .build();
    clock =
        Clock.offset(
            Clock.systemUTC(), Duration.ofMinutes(2)); // the replica restarts 2 minutes later
    store();
    assertThat(writesInProgress()).isZero();
    assertThat(abandoned.key()).startsWith("blobs/");
  }

  @Test
  void aReplicaKilledMidFillAbortsItsOwnUploadsAtItsRestartWhateverTheirAge() throws Exception {
    byte[] content = random(2 * PART + 1, 41);
    ContentWriter killed = store().newWriter(Digest.sha256(content));
    killed.append(ByteBuffer.wrap(content, 0, 2 * PART));
    // Another replica's fill in progress on the same bucket: not this replica's to abort.
    S3Objects.Upload othersFill = objects.startUpload("blobs/sha256/" + "cd".repeat(32)).block();
    assertThat(writesInProgress()).isEqualTo(2);
    store.close(); // killed: neither committed nor aborted
    store = null;

    store(); // restarted on the same storage.path; abandoned-upload-age is the default 6 h
    assertThat(objects.uploadsInProgress("").collectList().block())
        .as("only the other replica's upload is left")
        .containsExactly(othersFill.key());
    assertThat(presentAtFinalLocation(Digest.sha256(content))).isFalse();
    assertThat(Files.list(root.resolve(OwnUploads.FOLDER)).count()).as("records dropped").isZero();
    othersFill.abort().block();
  }

  @Test
  void theNextOwnerOfABlobAbortsTheDeadOwnersUploadWhenItStoresIt(@TempDir Path otherRoot)
      throws Exception {
    byte[] content = random(2 * PART + 1, 43);
    Digest digest = Digest.sha256(content);
    RegistryCacheProperties cache =
        RegistryCacheProperties.bind(Map.of("registry-cache.storage.path", otherRoot.toString()));
    try (S3BlobStore deadOwner =
        new S3BlobStore(
            objects,
            new StorageLayout(cache),
            Clock.systemUTC(),
            Duration.ZERO,
            ContentScope.REPOSITORY,
            properties)) {
      deadOwner.newWriter(digest).append(ByteBuffer.wrap(content, 0, 2 * PART)); // and then it dies
    }
    assertThat(writesInProgress()).isEqualTo(1);

    S3BlobStore newOwner = (S3BlobStore) store();
    assertThat(write(newOwner.newWriter(digest), content)).isEqualTo(content.length);
    assertThat(newOwner.othersUploadsAborted()).isEqualTo(1);
    assertThat(writesInProgress())
        .as("the dead owner's upload is gone with the blob stored")
        .isZero();
    assertThat(read(newOwner.open(digest).orElseThrow(), 0, content.length)).isEqualTo(content);
  }

  @Test
  void aLiveWriterWhoseUploadAnotherWriterAbortedStillCommitsOnTheStoredObject(
      @TempDir Path otherRoot) throws Exception {
    byte[] content = random(3 * PART + 1, 45);
    Digest digest = Digest.sha256(content);
    RegistryCacheProperties cache =
        RegistryCacheProperties.bind(Map.of("registry-cache.storage.path", otherRoot.toString()));
    try (S3BlobStore slow =
        new S3BlobStore(
            objects,
            new StorageLayout(cache),
            Clock.systemUTC(),
            Duration.ZERO,
            ContentScope.REPOSITORY,
            properties)) {
      ContentWriter slowWriter = slow.newWriter(digest);
      slowWriter.append(ByteBuffer.wrap(content, 0, PART + 1));
      assertThat(writesInProgress()).isEqualTo(1);

      write(
          store().newWriter(digest),
          content); // a second writer of the same bytes stores them first
      assertThat(writesInProgress()).isZero();

      slowWriter.append(ByteBuffer.wrap(content, PART + 1, content.length - PART - 1));
      // S3 answers the aborted upload's parts and completion with 404 NoSuchUpload, and the writer
      // then takes the stored object; s3proxy accepts them. Either way the commit must hold.
      assertThat(slowWriter.commit(content.length)).isEqualTo(content.length);
      assertThat(writesInProgress()).isZero();
      assertThat(read(slow.open(digest).orElseThrow(), 0, content.length)).isEqualTo(content);
      assertThat(Files.list(otherRoot.resolve(OwnUploads.FOLDER)).count()).isZero();
    }
  }

  @Override
  protected Path tmp() {
    return layout.tmpRoot();
  }
}
