package io.registrycache.storage;

import static io.registrycache.testsupport.CacheClient.describe;
import static org.assertj.core.api.Assertions.assertThat;

import io.registrycache.testsupport.CacheClient;
import io.registrycache.testsupport.CacheProperties;
import io.registrycache.testsupport.ManualCache;
import io.registrycache.testsupport.Sha256;
import io.registrycache.testsupport.TestImages;
import io.registrycache.testsupport.TestImages.Blob;
import io.registrycache.testsupport.TestImages.Image;
import io.registrycache.testsupport.TestImages.ImageIndex;
import io.registrycache.testsupport.UpstreamRegistryContainer;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.time.Duration;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.MethodOrderer;
import org.junit.jupiter.api.Order;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestMethodOrder;
import org.junit.jupiter.api.io.TempDir;

/**
 * The cache survives an application restart: content pulled by one Spring context is served by a
 * new context on the same storage directory while the upstream container is stopped.
 */
@TestMethodOrder(MethodOrderer.OrderAnnotation.class)
class RestartIT {

  static final UpstreamRegistryContainer upstream = new UpstreamRegistryContainer();

  @TempDir static Path storage;

  static Image image;
  static ImageIndex index;

  @BeforeAll
  static void startUpstream() {
    upstream.start();
    image =
        upstream.pusher().push(TestImages.smallOci(TestImages.uniqueRepository("restart"), "v1"));
    index =
        upstream
            .pusher()
            .push(TestImages.index(TestImages.uniqueRepository("restart-idx"), "multi"));
  }

  @AfterAll
  static void stopUpstream() {
    upstream.stop();
  }

  static ManualCache startCache(String tagTtl) {
    return ManualCache.start(
        CacheProperties.cache(storage)
            .localUpstream(upstream::baseUrl)
            .upstream("connect-timeout", "1s")
            .upstream("read-timeout", "2s")
            .set("registry-cache.manifests.tag-ttl", tagTtl));
  }

  @Test
  @Order(1)
  void pullWhileUpstreamIsUp() {
    try (ManualCache context = startCache("1h")) {
      pullEverything(context.client().withTimeout(Duration.ofSeconds(20)));
    }
  }

  @Test
  @Order(2)
  void pullAfterRestartWithUpstreamStopped() {
    upstream.stopUpstream();
    try (ManualCache context = startCache("1h")) {
      CacheClient cache = context.client().withTimeout(Duration.ofSeconds(20));
      pullEverything(cache);
      // tags fall back to what the cache holds
      HttpResponse<byte[]> tags = cache.get("/v2/" + image.repository() + "/tags/list");
      assertThat(tags.statusCode()).as(describe(tags)).isEqualTo(200);
      assertThat(new String(tags.body(), StandardCharsets.UTF_8)).contains("\"v1\"");
      // something never pulled is an upstream error, not a hang or a 404 lie
      HttpResponse<byte[]> missing =
          cache.get("/v2/" + image.repository() + "/blobs/" + TestImages.unknownDigest());
      assertThat(missing.statusCode()).as(describe(missing)).isIn(502, 503, 504);
      assertThat(CacheClient.errorMessage(missing))
          .as("the message names the upstream: " + describe(missing))
          .containsAnyOf("upstream.test", upstream.hostAndPort());
    }
  }

  @Test
  @Order(3)
  void expiredTagIsStillServedWhileUpstreamIsDown() {
    // tag-ttl 1ms: the cached tag must be revalidated, the upstream is down: serve what we have
    try (ManualCache context = startCache("1ms")) {
      CacheClient cache = context.client().withTimeout(Duration.ofSeconds(20));
      CacheClient.assertManifest(
          cache.getManifest("/v2/" + image.repository() + "/manifests/v1"), image.manifest());
    }
  }

  static void pullEverything(CacheClient cache) {
    CacheClient.assertManifest(
        cache.getManifest("/v2/" + image.repository() + "/manifests/v1"), image.manifest());
    CacheClient.assertManifest(
        cache.getManifest("/v2/" + image.repository() + "/manifests/" + image.manifest().digest()),
        image.manifest());
    for (Blob blob : image.blobs()) {
      HttpResponse<byte[]> response =
          cache.get("/v2/" + image.repository() + "/blobs/" + blob.digest());
      assertThat(response.statusCode()).as(describe(response)).isEqualTo(200);
      assertThat(Sha256.digest(response.body())).isEqualTo(blob.digest());
    }
    CacheClient.assertManifest(
        cache.getManifest("/v2/" + index.repository() + "/manifests/multi"), index.index());
    Image arm = index.platform("arm64").image();
    CacheClient.assertManifest(
        cache.getManifest("/v2/" + index.repository() + "/manifests/" + arm.manifest().digest()),
        arm.manifest());
    HttpResponse<byte[]> head =
        cache.head("/v2/" + image.repository() + "/blobs/" + image.layers().get(0).digest());
    assertThat(head.statusCode()).isEqualTo(200);
    assertThat(head.headers().firstValue("Content-Length"))
        .hasValue(Long.toString(image.layers().get(0).size()));
  }
}
