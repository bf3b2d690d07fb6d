package io.registrycache.storage.s3;

import static org.assertj.core.api.Assertions.assertThat;

import io.registrycache.config.ContentScope;
import io.registrycache.config.RegistryCacheProperties;
import io.registrycache.oci.Digest;
import io.registrycache.storage.ContentWriter;
import io.registrycache.storage.StorageLayout;
import io.registrycache.testsupport.S3TestServer;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.file.Path;
import java.time.Clock;
import java.time.Duration;
import java.time.Instant;
import java.time.ZoneId;
import java.time.ZoneOffset;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.TreeMap;
import java.util.concurrent.atomic.AtomicLong;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.RegisterExtension;
import org.junit.jupiter.api.io.TempDir;

/**
 * {@link S3LastPulls} against s3proxy in this JVM (no mock of S3): the record's encoding, one delta
 * per flush and none from an idle replica, the merge of several replicas' deltas, the evictor's
 * compaction into {@code access/base}, last pulls surviving a restart of a store, and an evicted
 * blob's delete cancelled by a pull another replica recorded meanwhile.
 */
class S3LastPullsTest {

  static final String BUCKET = "registry-cache-last-pulls";

  @RegisterExtension final S3TestServer s3 = S3TestServer.eachTest(BUCKET);

  @TempDir Path root;
  S3Objects objects;
  S3StorageProperties properties;

  /** A clock the test moves: pulls "later" than an object's last write, without waiting. */
  final AtomicLong now = new AtomicLong(System.currentTimeMillis());

  final Clock clock =
      new Clock() {
        @Override
        public ZoneId getZone() {
          return ZoneOffset.UTC;
        }

        @Override
        public Clock withZone(ZoneId zone) {
          return this;
        }

        @Override
        public Instant instant() {
          return Instant.ofEpochMilli(now.get());
        }
      };
  final List<AutoCloseable> toClose = new ArrayList<>();

  @BeforeEach
  void openObjects() {
    properties = s3.settings().build();
    objects = S3Objects.create(properties);
  }

  @AfterEach
  void close() throws Exception {
    for (int i = toClose.size() - 1; i >= 0; i--) {
      toClose.get(i).close();
    }
    objects.close();
  }

  static Digest digest(long seed) {
    byte[] b = new byte[100];
    new Random(seed).nextBytes(b);
    return Digest.sha256(b);
  }

  List<String> deltas() {
    return objects
        .list(S3LastPulls.PREFIX)
        .filter(k -> !k.equals(S3LastPulls.BASE))
        .collectList()
        .block();
  }

  S3LastPulls replica() {
    return new S3LastPulls(
        objects, clock, Duration.ofMinutes(1)); // flushed by the test, not started
  }

  @Test
  void aRecordDecodesToWhatWasEncodedAndCostsAboutFortyBytesADigest() {
    Map<Digest, Long> times = new TreeMap<>(Comparator.comparing(Digest::toString));
    for (int i = 0; i < 1_000; i++) {
      times.put(digest(i), 1_700_000_000_000L + i * 1_000L);
    }
    times.put(new Digest("sha512", "ab".repeat(64)), 5L);

    byte[] encoded = S3LastPulls.encode(times);

    assertThat(S3LastPulls.decode(encoded)).isEqualTo(times);
    System.out.printf(
        "S3LastPullsTest: %d digests in %d bytes (%.1f a digest)%n",
        times.size(), encoded.length, encoded.length / (double) times.size());
    assertThat(encoded.length).as("bytes of 1,001 digests").isLessThan(1_001 * 45);
    assertThat(S3LastPulls.decode("not a record".getBytes())).isEmpty();
  }

  @Test
  void eachFlushWritesOneDeltaAndAnIdleReplicaWritesNothing() throws Exception {
    S3LastPulls a = replica();
    assertThat(a.flush()).isZero();
    assertThat(deltas()).as("nothing recorded, nothing written").isEmpty();

    a.record(digest(1), 1_000);
    a.record(digest(2), 2_000);
    a.record(digest(1), 500); // older: the later time stays
    assertThat(a.flush()).isEqualTo(2);
    assertThat(deltas()).hasSize(1).allMatch(k -> k.matches("access/\\d{13}-[0-9a-f]{8}"));

    assertThat(a.flush()).as("no pull since").isZero();
    a.record(digest(2), 1_500); // not later than what the bucket has: not written again
    assertThat(a.flush()).isZero();
    assertThat(deltas()).hasSize(1);
  }

  @Test
  void replicasMergeEachOthersDeltasLatestTimeWins() throws Exception {
    S3LastPulls a = replica();
    S3LastPulls b = replica();
    a.record(digest(1), 1_000);
    a.record(digest(2), 9_000);
    a.flush();
    now.addAndGet(1);
    b.record(digest(1), 5_000);
    b.flush();

    S3LastPulls evictor = replica();
    assertThat(evictor.refresh()).isEqualTo(2);
    assertThat(evictor.lastPull(digest(1))).hasValue(5_000);
    assertThat(evictor.lastPull(digest(2))).hasValue(9_000);
    assertThat(evictor.lastPull(digest(3))).isEmpty();
    assertThat(evictor.refresh()).as("deltas already read are not read again").isZero();
  }

  @Test
  void theEvictorFoldsDeltasIntoTheBaseKeepingOnlyStoredDigestsAndLaterDeltasStay()
      throws Exception {
    S3LastPulls a = replica();
    S3LastPulls b = replica();
    a.record(digest(1), 1_000);
    a.record(digest(3), 3_000);
    a.flush();
    now.addAndGet(1);
    b.record(digest(2), 2_000);
    b.flush();

    S3LastPulls evictor = replica();
    S3LastPulls.Compaction c =
        evictor.compact(d -> !d.equals(digest(3))); // digest 3 is no longer stored
    assertThat(c).isEqualTo(new S3LastPulls.Compaction(2, 2));
    assertThat(deltas()).as("folded deltas deleted").isEmpty();

    now.addAndGet(1);
    b.record(digest(2), 7_000);
    b.flush();
    S3LastPulls restarted = replica(); // a replica starting now reads the base and the later delta
    restarted.refresh();
    assertThat(restarted.lastPull(digest(1))).hasValue(1_000);
    assertThat(restarted.lastPull(digest(2))).hasValue(7_000);
    assertThat(restarted.lastPull(digest(3))).isEmpty();
    assertThat(deltas()).hasSize(1);
    assertThat(a.lastPull(digest(3)))
        .as("a's own record, before it sees the new base")
        .hasValue(3_000);
    a.refresh();
    assertThat(a.lastPull(digest(3)))
        .as("folded away as no longer stored: forgotten by every replica")
        .isEmpty();
    assertThat(a.lastPull(digest(2))).hasValue(7_000);
  }

  S3BlobStore store(S3LastPulls pulls) throws IOException {
    RegistryCacheProperties cache =
        RegistryCacheProperties.bind(Map.of("registry-cache.storage.path", root.toString()));
    S3BlobStore s =
        new S3BlobStore(
            objects,
            new StorageLayout(cache),
            clock,
            Duration.ZERO,
            ContentScope.REPOSITORY,
            properties,
            pulls);
    toClose.add(s);
    return s;
  }

  Digest put(S3BlobStore store, long seed) throws IOException {
    byte[] content = new byte[10_000];
    new Random(seed).nextBytes(content);
    Digest d = Digest.sha256(content);
    ContentWriter w = store.newWriter(d);
    w.append(ByteBuffer.wrap(content));
    w.commit(content.length);
    return d;
  }

  @Test
  void lastPullsSurviveARestartOfTheStore() throws Exception {
    S3LastPulls pulls = new S3LastPulls(objects, clock, Duration.ofMinutes(1));
    S3BlobStore first = store(pulls);
    Digest d = put(first, 1);
    long stored = first.entry(d).orElseThrow().lastPulledMillis();
    now.addAndGet(Duration.ofHours(3).toMillis());
    assertThat(first.lookup(d)).isPresent(); // a pull, three hours after the write
    assertThat(first.persistAccessTimes()).isEqualTo(1);
    pulls.flush();
    first.close();
    toClose.remove(first);

    S3BlobStore restarted = store(new S3LastPulls(objects, clock, Duration.ofMinutes(1)));
    long pulled = restarted.entry(d).orElseThrow().lastPulledMillis();
    assertThat(pulled)
        .as("last pull after a restart: the recorded pull, not the object's write")
        .isEqualTo(now.get())
        .isGreaterThan(stored);
  }

  @Test
  void anEvictedBlobIsKeptInTheBucketWhenAnotherReplicaPulledItMeanwhileElseDeleted()
      throws Exception {
    S3LastPulls evictorPulls = new S3LastPulls(objects, clock, Duration.ofMinutes(1));
    S3BlobStore evictor = store(evictorPulls);
    Digest hot = put(evictor, 1);
    Digest cold = put(evictor, 2);
    S3LastPulls otherPulls = new S3LastPulls(objects, clock, Duration.ofMinutes(1));
    S3BlobStore other = store(otherPulls);
    assertThat(other.size(hot)).isPresent();

    assertThat(evictor.evict(hot, Long.MAX_VALUE)).isPositive();
    assertThat(evictor.evict(cold, Long.MAX_VALUE)).isPositive();
    // After the evictor selected them, another replica pulls one and flushes its record.
    now.addAndGet(5_000);
    assertThat(other.lookup(hot)).isPresent();
    other.persistAccessTimes();
    otherPulls.flush();

    evictor.close(); // runs the deletes waiting out their grace now
    toClose.remove(evictor);

    assertThat(objects.stat(S3BlobStore.key(hot)).block())
        .as("pulled elsewhere meanwhile: kept")
        .isPresent();
    assertThat(objects.stat(S3BlobStore.key(cold)).block()).as("pulled nowhere: deleted").isEmpty();
  }
}
