package io.registrycache.proxy;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import io.registrycache.RegistryCacheApplication;
import io.registrycache.testsupport.CacheClient;
import io.registrycache.testsupport.CacheProperties;
import io.registrycache.testsupport.ScriptedHttp;
import io.registrycache.testsupport.TestFiles;
import io.registrycache.testsupport.TestImages;
import java.nio.file.Path;
import java.time.Duration;
import java.util.Random;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.Test;
import org.springframework.boot.test.context.SpringBootTest;
import org.springframework.boot.test.web.server.LocalServerPort;
import org.springframework.test.context.DynamicPropertyRegistry;
import org.springframework.test.context.DynamicPropertySource;

/**
 * Prefetch is skipped where it cannot pay off: a manifest that came back faster than {@code
 * blobs.prefetch.min-upstream-latency} starts no fill of its blobs (here the threshold is above the
 * scripted upstream's answer time), and the client's own requests fetch them.
 */
@SpringBootTest(
    classes = RegistryCacheApplication.class,
    webEnvironment = SpringBootTest.WebEnvironment.RANDOM_PORT)
class PrefetchNearbyUpstreamTest {

  static final ScriptedHttp upstream = new ScriptedHttp();
  static final Path storage = TestFiles.tempDirectory("registry-cache-prefetch-near-");

  @LocalServerPort int port;

  @DynamicPropertySource
  static void properties(DynamicPropertyRegistry registry) {
    CacheProperties.cache(storage)
        .localUpstream(upstream::baseUrl)
        .set("registry-cache.blobs.prefetch.min-upstream-latency", "5s")
        .addTo(registry);
  }

  @AfterAll
  static void stop() {
    upstream.close();
  }

  @Test
  void aManifestFromANearbyUpstreamStartsNoPrefetch() {
    byte[] layer = new byte[10_000];
    new Random(11).nextBytes(layer);
    TestImages.Image image =
        TestImages.withLayers(TestImages.uniqueRepository("near"), "v1", layer);
    String repo = image.repository();
    upstream.route(
        "/v2/" + repo + "/manifests/v1",
        ex ->
            ScriptedHttp.send(
                ex,
                200,
                image.manifest().mediaType(),
                image.manifest().bytes(),
                image.manifest().digest()));
    for (TestImages.Blob blob : image.blobs()) {
      upstream.route(
          "/v2/" + repo + "/blobs/" + blob.digest(),
          ex ->
              ScriptedHttp.send(ex, 200, "application/octet-stream", blob.bytes(), blob.digest()));
    }
    CacheClient cache = CacheClient.onPort(port);

    assertThat(cache.getManifest("/v2/" + repo + "/manifests/v1").statusCode()).isEqualTo(200);
    await()
        .during(Duration.ofMillis(600))
        .atMost(Duration.ofSeconds(5))
        .until(
            () ->
                image.blobs().stream()
                    .allMatch(
                        b -> upstream.count("GET", "/v2/" + repo + "/blobs/" + b.digest()) == 0));
    for (TestImages.Blob blob : image.blobs()) {
      assertThat(cache.get("/v2/" + repo + "/blobs/" + blob.digest()).statusCode()).isEqualTo(200);
      assertThat(upstream.count("GET", "/v2/" + repo + "/blobs/" + blob.digest())).isEqualTo(1);
    }
  }
}
