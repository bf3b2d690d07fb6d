package io.registrycache.storage.s3;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import io.registrycache.cluster.ClusterMembership;
import io.registrycache.oci.Digest;
import io.registrycache.storage.EvictionTurn;
import io.registrycache.storage.ManifestStore;
import io.registrycache.storage.StorageJanitor;
import io.registrycache.testsupport.ManualCache;
import io.registrycache.testsupport.S3TestServer;
import io.registrycache.testsupport.TestImages;
import io.registrycache.testsupport.TestImages.Blob;
import io.registrycache.testsupport.TestImages.Image;
import io.registrycache.testsupport.UpstreamRegistryContainer;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * Issue 24, item 1, "done when": three replicas on one bucket (s3proxy in this JVM) in front of
 * registry:2, with a budget for the bucket. An image first pulled long ago through replica A is
 * pulled again recently only through replica B; then A pulls new images past the budget. The one
 * evicting replica (the owner of {@code janitor}, neither A nor B) evicts by every replica's last
 * pulls: B's image stays in the bucket, older content goes, the bucket ends under its budget, and
 * every manifest left in the bucket still has all its blobs there.
 */
class S3BucketBudgetIT {

  static final String BUCKET = "registry-cache-budget";
  static final String TOKEN = "s3-budget-it-token-" + TestImages.RUN_ID + "-0123456789";
  static final int REPLICAS = 3;
  static final int LAYER = 1024 * 1024;

  /** Five one-layer images of 1 MiB: 4.5 MiB, so high watermark 4.05 MiB and low 3.6 MiB. */
  static final long BUDGET = 9L * LAYER / 2;

  static final UpstreamRegistryContainer upstream = UpstreamRegistryContainer.started();
  static final List<ManualCache> replicas = new ArrayList<>();
  static S3TestServer s3;
  static S3Objects objects;

  @BeforeAll
  static void start() throws Exception {
    s3 = S3TestServer.started(BUCKET);
    replicas.addAll(
        s3.startCluster(
            REPLICAS,
            "s3-budget",
            TOKEN,
            upstream::baseUrl,
            replica ->
                replica
                    .set("registry-cache.storage.max-bytes", BUDGET)
                    .set(
                        "registry-cache.storage.janitor-interval",
                        "1h") // passes run when the test asks, or over the watermark
                    .set("registry-cache.storage.delete-grace", "1s")
                    .set("registry-cache.storage.s3.access-flush", "1s")));
    objects = replicas.get(0).context().getBean(S3Objects.class);
  }

  @AfterAll
  static void stop() {
    replicas.forEach(ManualCache::close);
    s3.close();
  }

  static int evictor() {
    for (int i = 0; i < REPLICAS; i++) {
      if (replicas
          .get(i)
          .context()
          .getBean(ClusterMembership.class)
          .ownerElsewhere(EvictionTurn.KEY)
          .isEmpty()) {
        return i;
      }
    }
    throw new AssertionError("no replica owns " + EvictionTurn.KEY);
  }

  static Image image(String name, long seed) {
    return upstream
        .pusher()
        .push(
            TestImages.withLayers(
                TestImages.uniqueRepository(name), "v1", TestImages.randomBytes(LAYER, seed)));
  }

  /** Every pull recorded so far by {@code replica} written to the bucket now. */
  static void flushPulls(ManualCache replica) throws Exception {
    replica
        .context()
        .getBean(StorageJanitor.class)
        .runOnce(); // records pulls (a non-evictor evicts nothing)
    replica.context().getBean(S3LastPulls.class).flush();
  }

  static boolean inBucket(String digest) {
    return objects.stat(S3BlobStore.key(Digest.parse(digest))).block().isPresent();
  }

  /** Bytes of blobs and manifests in the bucket: what the budget counts. */
  static long bucketBytes() {
    return objects
        .listWithSizes("")
        .filter(
            o ->
                o.key().startsWith("blobs/")
                    || o.key().startsWith("manifests/") && !o.key().endsWith(".type"))
        .map(S3Objects.Listed::size)
        .reduce(0L, Long::sum)
        .block();
  }

  @Test
  void theBudgetHoldsForTheBucketAndWhatAnotherReplicaPulledRecentlyStays() throws Exception {
    int o = evictor();
    ManualCache owner = replicas.get(o);
    ManualCache b = replicas.get((o + 1) % REPLICAS);
    ManualCache a = replicas.get((o + 2) % REPLICAS);
    assertThat(a.context().getBean(StorageJanitor.class).evictorElsewhere()).isPresent();

    // Long ago, through A: the image B will pull again, then two more.
    Image kept = image("budget-kept", 1);
    Image old1 = image("budget-old1", 2);
    Image old2 = image("budget-old2", 3);
    for (Image i : List.of(kept, old1, old2)) {
      a.client().pullAndVerify(i);
      Thread.sleep(1_100); // distinct last-pulled times, a second apart (the index's resolution)
    }
    replicas.forEach(ManualCache::awaitDownloadsCommitted);
    flushPulls(a);

    // Recently, only through B: the first image again. B records it in the bucket.
    b.client().pullAndVerify(kept);
    flushPulls(b);
    Thread.sleep(1_100);

    // Through A, past the budget.
    Image new1 = image("budget-new1", 4);
    Image new2 = image("budget-new2", 5);
    a.client().pullAndVerify(new1);
    a.client().pullAndVerify(new2);
    replicas.forEach(ManualCache::awaitDownloadsCommitted);
    flushPulls(a);
    assertThat(bucketBytes())
        .as("the bucket past its budget's high watermark")
        .isGreaterThan((long) (BUDGET * 0.9));

    owner.context().getBean(StorageJanitor.class).runOnce();

    // Objects go after the delete grace (the longer of delete-grace and two access-flush
    // intervals).
    await()
        .atMost(Duration.ofSeconds(30))
        .pollInterval(Duration.ofMillis(250))
        .untilAsserted(
            () -> assertThat(bucketBytes()).as("bytes in the bucket").isLessThanOrEqualTo(BUDGET));
    System.out.printf(
        "S3BucketBudgetIT: evictor replica %d, bucket %d bytes of %d; kept image %s, old1 %s, old2 %s%n",
        o,
        bucketBytes(),
        BUDGET,
        inBucket(kept.layers().get(0).digest()),
        inBucket(old1.layers().get(0).digest()),
        inBucket(old2.layers().get(0).digest()));

    for (Blob blob : kept.blobs()) {
      assertThat(inBucket(blob.digest()))
          .as("blob %s of the image B pulled recently", blob.digest())
          .isTrue();
    }
    assertThat(inBucket(old1.layers().get(0).digest()))
        .as("the least recently pulled image (last pulled through A, before B's pull) is evicted")
        .isFalse();
    for (Image i : List.of(new1, new2)) {
      assertThat(inBucket(i.layers().get(0).digest())).as("just pulled through A").isTrue();
    }
    // No manifest left in the bucket lost a blob it references.
    ManifestStore manifests = owner.context().getBean(ManifestStore.class);
    manifests.rescan();
    for (Digest m : manifests.digests()) {
      for (Digest ref : manifests.content(m).orElseThrow().referencedDigests()) {
        assertThat(inBucket(ref.toString()) || manifests.entry(ref).isPresent())
            .as("%s referenced by remaining manifest %s", ref, m)
            .isTrue();
      }
    }
    // The image B pulled is served through every replica (each verifies every digest).
    for (ManualCache r : replicas) {
      r.client().pullAndVerify(kept);
    }
  }

  static String management(ManualCache replica) {
    return "http://127.0.0.1:"
        + replica.context().getEnvironment().getRequiredProperty("local.management.port");
  }

  @Test
  void theAdminApiOfANonEvictingReplicaListsTheClustersContentAndNamesTheEvictor()
      throws Exception {
    int o = evictor();
    ManualCache other = replicas.get((o + 1) % REPLICAS);
    ManualCache filler = replicas.get((o + 2) % REPLICAS);
    Image image = image("budget-listed", 20);
    filler.client().pullAndVerify(image);
    filler.awaitDownloadsCommitted();

    HttpClient http = HttpClient.newHttpClient();
    String blobs =
        http.send(
                HttpRequest.newBuilder(URI.create(management(other) + "/actuator/cache/blobs"))
                    .build(),
                HttpResponse.BodyHandlers.ofString())
            .body();
    for (Blob blob : image.blobs()) {
      assertThat(blobs)
          .as("another replica's blob in this replica's listing")
          .contains(blob.digest());
    }
    HttpResponse<String> prune =
        http.send(
            HttpRequest.newBuilder(URI.create(management(other) + "/actuator/cache/prune"))
                .header("Content-Type", "application/json")
                .POST(HttpRequest.BodyPublishers.ofString("{\"olderThan\":\"1d\"}"))
                .build(),
            HttpResponse.BodyHandlers.ofString());
    assertThat(prune.statusCode()).isEqualTo(409);
    assertThat(prune.body())
        .contains("evictor")
        .contains(
            String.valueOf(
                replicas
                    .get(o)
                    .context()
                    .getBean(ClusterMembership.class)
                    .view()
                    .self()
                    .orElseThrow()
                    .port()));
  }
}
