package io.registrycache.proxy;

import static io.registrycache.testsupport.CacheClient.describe;
import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import io.micrometer.core.instrument.MeterRegistry;
import io.registrycache.RegistryCacheApplication;
import io.registrycache.testsupport.CacheClient;
import io.registrycache.testsupport.CacheProperties;
import io.registrycache.testsupport.ScriptedHttp;
import io.registrycache.testsupport.Sha256;
import io.registrycache.testsupport.TestFiles;
import io.registrycache.testsupport.TestImages;
import java.io.UncheckedIOException;
import java.net.http.HttpResponse;
import java.nio.file.Path;
import java.time.Duration;
import java.util.Random;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.function.BooleanSupplier;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.springframework.beans.factory.annotation.Autowired;
import org.springframework.boot.test.context.SpringBootTest;
import org.springframework.boot.test.web.server.LocalServerPort;
import org.springframework.test.context.DynamicPropertyRegistry;
import org.springframework.test.context.DynamicPropertySource;

/**
 * Prefetch on manifest (issue 28) over real HTTP: an upstream scripted with a delay per request
 * ({@link ScriptedHttp}), the service as it runs. With {@code max-in-flight} 2, {@code
 * max-bytes-per-manifest} 100 KB and the layers of {@code linux/arm64} index entries.
 */
@SpringBootTest(
    classes = RegistryCacheApplication.class,
    webEnvironment = SpringBootTest.WebEnvironment.RANDOM_PORT)
class PrefetchTest {

  static final ScriptedHttp upstream = new ScriptedHttp();
  static final Path storage = TestFiles.tempDirectory("registry-cache-prefetch-");
  static final Duration DELAY = Duration.ofMillis(150);
  static final Duration WAIT = Duration.ofSeconds(20);

  @LocalServerPort int port;
  @Autowired MeterRegistry meters;
  CacheClient cache;

  /** Blob GETs the upstream is answering now, and the most at once. */
  final AtomicInteger blobGetsNow = new AtomicInteger();

  final AtomicInteger mostBlobGetsAtOnce = new AtomicInteger();

  @DynamicPropertySource
  static void properties(DynamicPropertyRegistry registry) {
    CacheProperties.cache(storage)
        .localUpstream(upstream::baseUrl)
        .upstream("retry.max-attempts", "1")
        .upstream("circuit-breaker.enabled", "false")
        .set("registry-cache.blobs.prefetch.max-in-flight", "2")
        .set("registry-cache.blobs.prefetch.max-bytes-per-manifest", "100KB")
        .set("registry-cache.blobs.prefetch.platforms", "linux/arm64")
        .addTo(registry);
  }

  @AfterAll
  static void stop() {
    upstream.close();
  }

  @BeforeEach
  void client() {
    cache = CacheClient.onPort(port);
  }

  private static byte[] random(int size, long seed) {
    byte[] b = new byte[size];
    new Random(seed).nextBytes(b);
    return b;
  }

  /**
   * Serves {@code image} by tag and digest, each answer after {@link #DELAY}; {@code wrong} is sent
   * for its first layer instead.
   */
  private void serve(TestImages.Image image, byte[] wrong) {
    String repo = image.repository();
    route("/v2/" + repo + "/manifests/" + image.tag(), image.manifest());
    route("/v2/" + repo + "/manifests/" + image.manifest().digest(), image.manifest());
    for (TestImages.Blob blob : image.blobs()) {
      byte[] body = wrong != null && blob == image.layers().get(0) ? wrong : blob.bytes();
      upstream.route(
          "/v2/" + repo + "/blobs/" + blob.digest(),
          ex -> {
            boolean get = "GET".equals(ex.getRequestMethod());
            if (get) {
              mostBlobGetsAtOnce.accumulateAndGet(blobGetsNow.incrementAndGet(), Math::max);
            }
            try {
              pause();
              ScriptedHttp.send(ex, 200, "application/octet-stream", body, blob.digest());
            } finally {
              if (get) {
                blobGetsNow.decrementAndGet();
              }
            }
          });
    }
  }

  private static void route(String path, TestImages.Manifest manifest) {
    upstream.route(
        path,
        ex -> {
          pause();
          ScriptedHttp.send(ex, 200, manifest.mediaType(), manifest.bytes(), manifest.digest());
        });
  }

  private static void pause() {
    try {
      Thread.sleep(DELAY.toMillis()); // the upstream's round trip
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    }
  }

  private static long blobGets(TestImages.Image image, TestImages.Blob blob) {
    return upstream.count("GET", "/v2/" + image.repository() + "/blobs/" + blob.digest());
  }

  /** Waits until {@code condition} holds, at most {@link #WAIT}; whether it did. */
  private static boolean eventually(BooleanSupplier condition) {
    await().atMost(WAIT).until(condition::getAsBoolean);
    return true;
  }

  /** Whether {@code condition} holds all through four upstream round trips. */
  private static boolean throughout(BooleanSupplier condition) {
    await().during(DELAY.multipliedBy(4)).atMost(WAIT).until(condition::getAsBoolean);
    return true;
  }

  private double counter(String name) {
    var c = meters.find(name).counter();
    return c == null ? 0 : c.count();
  }

  @Test
  void theBlobsOfAColdImageAreFetchedBeforeTheClientAsksAndItsRequestsJoinThoseFills() {
    TestImages.Image image =
        TestImages.withLayers(
            TestImages.uniqueRepository("prefetch"),
            "v1",
            random(10_000, 1),
            random(12_000, 2),
            random(9_000, 3),
            random(11_000, 4));
    serve(image, null);
    double hits = counter("registry.cache.prefetch.hits");

    HttpResponse<byte[]> manifest =
        cache.getManifest("/v2/" + image.repository() + "/manifests/v1");
    assertThat(manifest.statusCode()).as(describe(manifest)).isEqualTo(200);
    // No client has asked for a blob yet; the upstream is asked for all of them, two at a time.
    assertThat(eventually(() -> image.blobs().stream().allMatch(b -> blobGets(image, b) == 1)))
        .isTrue();
    assertThat(mostBlobGetsAtOnce.get()).isLessThanOrEqualTo(2);

    for (TestImages.Blob blob : image.blobs()) {
      HttpResponse<byte[]> got = cache.get("/v2/" + image.repository() + "/blobs/" + blob.digest());
      assertThat(got.statusCode()).as(describe(got)).isEqualTo(200);
      assertThat(Sha256.digest(got.body())).isEqualTo(blob.digest());
      assertThat(blobGets(image, blob)).isEqualTo(1);
    }
    assertThat(counter("registry.cache.prefetch.hits") - hits).isEqualTo(image.blobs().size());
  }

  @Test
  void blobsBeyondTheBytesPerManifestAreLeftToTheClient() {
    // config (small) + 60 KB fit in 100 KB; the second 60 KB layer does not.
    TestImages.Image image =
        TestImages.withLayers(
            TestImages.uniqueRepository("prefetch-bound"),
            "v1",
            random(60_000, 5),
            random(60_000, 6));
    serve(image, null);

    cache.getManifest("/v2/" + image.repository() + "/manifests/v1");
    assertThat(
            eventually(
                () ->
                    blobGets(image, image.layers().get(0)) == 1
                        && blobGets(image, image.config()) == 1))
        .isTrue();
    assertThat(throughout(() -> blobGets(image, image.layers().get(1)) == 0)).isTrue();
  }

  @Test
  void anIndexPrefetchesItsChildManifestsButOnlyTheLayersOfAConfiguredPlatform() {
    TestImages.ImageIndex index =
        TestImages.index(TestImages.uniqueRepository("prefetch-index"), "v1");
    String repo = index.repository();
    route("/v2/" + repo + "/manifests/v1", index.index());
    for (TestImages.PlatformImage p : index.platforms()) {
      serve(
          new TestImages.Image(
              repo, p.image().tag(), p.image().manifest(), p.image().config(), p.image().layers()),
          null);
    }
    TestImages.Image amd64 = index.platform("amd64").image();
    TestImages.Image arm64 = index.platform("arm64").image();

    assertThat(cache.getManifest("/v2/" + repo + "/manifests/v1").statusCode()).isEqualTo(200);
    assertThat(
            eventually(
                () ->
                    index.platforms().stream()
                        .allMatch(
                            p ->
                                upstream.count(
                                        "GET",
                                        "/v2/"
                                            + repo
                                            + "/manifests/"
                                            + p.image().manifest().digest())
                                    == 1)))
        .isTrue();
    assertThat(
            eventually(
                () ->
                    arm64.blobs().stream()
                        .allMatch(
                            b ->
                                upstream.count("GET", "/v2/" + repo + "/blobs/" + b.digest())
                                    == 1)))
        .isTrue();
    assertThat(
            throughout(
                () ->
                    amd64.blobs().stream()
                        .allMatch(
                            b ->
                                upstream.count("GET", "/v2/" + repo + "/blobs/" + b.digest())
                                    == 0)))
        .isTrue();
    // A client that then asks for the amd64 manifest gets its blobs prefetched after all.
    assertThat(
            cache
                .getManifest("/v2/" + repo + "/manifests/" + amd64.manifest().digest())
                .statusCode())
        .isEqualTo(200);
    assertThat(
            eventually(
                () ->
                    amd64.blobs().stream()
                        .allMatch(
                            b ->
                                upstream.count("GET", "/v2/" + repo + "/blobs/" + b.digest())
                                    == 1)))
        .isTrue();
  }

  @Test
  void aPrefetchedBlobWhoseBytesAreWrongIsNotKept() {
    TestImages.Image image =
        TestImages.withLayers(
            TestImages.uniqueRepository("prefetch-wrong"),
            "v1",
            random(10_000, 7),
            random(10_000, 8));
    TestImages.Blob bad = image.layers().get(0);
    serve(image, random(10_000, 9));

    cache.getManifest("/v2/" + image.repository() + "/manifests/v1");
    assertThat(
            eventually(
                () -> blobGets(image, image.layers().get(1)) == 1 && blobGets(image, bad) == 1))
        .isTrue();
    assertThat(eventually(() -> counter("registry.cache.prefetch.blobs") >= 2))
        .isTrue(); // config and the good layer
    // Nothing was kept of the bad one: a client's request goes to the upstream again (and fails).
    HttpResponse<byte[]> got;
    try {
      got = cache.get("/v2/" + image.repository() + "/blobs/" + bad.digest());
      assertThat(got.statusCode() != 200 || !Sha256.digest(got.body()).equals(bad.digest()))
          .isTrue();
    } catch (UncheckedIOException aborted) {
      // the client saw its transfer aborted: never a clean end of wrong bytes
    }
    assertThat(blobGets(image, bad)).isEqualTo(2);
  }
}
