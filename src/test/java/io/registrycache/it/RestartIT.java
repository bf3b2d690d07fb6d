package io.registrycache.it;

import static io.registrycache.testsupport.CacheClient.describe;
import static org.assertj.core.api.Assertions.assertThat;

import io.registrycache.RegistryCacheApplication;
import io.registrycache.testsupport.CacheClient;
import io.registrycache.testsupport.Sha256;
import io.registrycache.testsupport.TestImages;
import io.registrycache.testsupport.TestImages.Blob;
import io.registrycache.testsupport.TestImages.Image;
import io.registrycache.testsupport.TestImages.ImageIndex;
import io.registrycache.testsupport.UpstreamRegistryContainer;
import java.net.http.HttpResponse;
import java.nio.file.Path;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.MethodOrderer;
import org.junit.jupiter.api.Order;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestMethodOrder;
import org.junit.jupiter.api.io.TempDir;
import org.springframework.beans.factory.config.BeanPostProcessor;
import org.springframework.boot.builder.SpringApplicationBuilder;
import org.springframework.context.ConfigurableApplicationContext;
import org.springframework.http.client.ReactorResourceFactory;

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
    image = upstream.pusher().push(TestImages.smallOci(TestImages.uniqueRepository("restart"), "v1"));
    index = upstream.pusher().push(TestImages.index(TestImages.uniqueRepository("restart-idx"), "multi"));
  }

  @AfterAll
  static void stopUpstream() {
    upstream.stop();
  }

  static ConfigurableApplicationContext startCache(String tagTtl) {
    return new SpringApplicationBuilder(RegistryCacheApplication.class)
        .initializers(RestartIT::keepGlobalReactorResources)
        .run(
            "--server.port=0",
            "--management.server.port=0",
            "--registry-cache.storage.path=" + storage,
            "--registry-cache.default-upstream=local",
            "--registry-cache.upstreams.local.host=upstream.test",
            "--registry-cache.upstreams.local.url=" + upstream.baseUrl(),
            "--registry-cache.upstreams.local.connect-timeout=1s",
            "--registry-cache.upstreams.local.read-timeout=2s",
            "--registry-cache.manifests.tag-ttl=" + tagTtl);
  }

  /**
   * Reactor Netty's global event loops are shared by every Spring context in this JVM (the shared
   * {@code @SpringBootTest} context of the other ITs included). Closing a context whose
   * {@link ReactorResourceFactory} owns the global resources would dispose them under the other
   * contexts; {@code @SpringBootTest} prevents that for its contexts, this does it for ours.
   */
  static void keepGlobalReactorResources(ConfigurableApplicationContext context) {
    context
        .getBeanFactory()
        .addBeanPostProcessor(
            new BeanPostProcessor() {
              @Override
              public Object postProcessBeforeInitialization(Object bean, String name) {
                if (bean instanceof ReactorResourceFactory factory) {
                  factory.setUseGlobalResources(false);
                }
                return bean;
              }
            });
  }

  static CacheClient client(ConfigurableApplicationContext context) {
    return CacheClient.onPort(
        Integer.parseInt(context.getEnvironment().getRequiredProperty("local.server.port")));
  }

  @Test
  @Order(1)
  void pullWhileUpstreamIsUp() {
    try (ConfigurableApplicationContext context = startCache("1h")) {
      pullEverything(client(context));
    }
  }

  @Test
  @Order(2)
  void pullAfterRestartWithUpstreamStopped() {
    upstream.stopUpstream();
    try (ConfigurableApplicationContext context = startCache("1h")) {
      CacheClient cache = client(context);
      pullEverything(cache);
      // tags fall back to what the cache holds
      HttpResponse<byte[]> tags = cache.get("/v2/" + image.repository() + "/tags/list");
      assertThat(tags.statusCode()).as(describe(tags)).isEqualTo(200);
      assertThat(new String(tags.body(), java.nio.charset.StandardCharsets.UTF_8)).contains("\"v1\"");
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
    try (ConfigurableApplicationContext context = startCache("1ms")) {
      CacheClient cache = client(context);
      ManifestPullIT.assertManifest(
          cache.getManifest("/v2/" + image.repository() + "/manifests/v1"), image.manifest());
    }
  }

  static void pullEverything(CacheClient cache) {
    ManifestPullIT.assertManifest(
        cache.getManifest("/v2/" + image.repository() + "/manifests/v1"), image.manifest());
    ManifestPullIT.assertManifest(
        cache.getManifest("/v2/" + image.repository() + "/manifests/" + image.manifest().digest()),
        image.manifest());
    for (Blob blob : image.blobs()) {
      HttpResponse<byte[]> response = cache.get("/v2/" + image.repository() + "/blobs/" + blob.digest());
      assertThat(response.statusCode()).as(describe(response)).isEqualTo(200);
      assertThat(Sha256.digest(response.body())).isEqualTo(blob.digest());
    }
    ManifestPullIT.assertManifest(
        cache.getManifest("/v2/" + index.repository() + "/manifests/multi"), index.index());
    Image arm = index.platform("arm64").image();
    ManifestPullIT.assertManifest(
        cache.getManifest("/v2/" + index.repository() + "/manifests/" + arm.manifest().digest()),
        arm.manifest());
    HttpResponse<byte[]> head =
        cache.head("/v2/" + image.repository() + "/blobs/" + image.layers().get(0).digest());
    assertThat(head.statusCode()).isEqualTo(200);
    assertThat(head.headers().firstValue("Content-Length"))
        .hasValue(Long.toString(image.layers().get(0).size()));
  }
}
