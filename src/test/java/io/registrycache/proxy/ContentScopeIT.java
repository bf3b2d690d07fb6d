package io.registrycache.proxy;

import static org.assertj.core.api.Assertions.assertThat;

import io.registrycache.RegistryCacheApplication;
import io.registrycache.testsupport.CacheClient;
import io.registrycache.testsupport.CacheProperties;
import io.registrycache.testsupport.ManualCache;
import io.registrycache.testsupport.TestFiles;
import io.registrycache.testsupport.TestImages;
import io.registrycache.testsupport.UpstreamRegistryContainer;
import java.net.http.HttpResponse;
import java.nio.file.Path;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.springframework.beans.factory.annotation.Autowired;
import org.springframework.boot.test.context.SpringBootTest;
import org.springframework.boot.test.web.server.LocalServerPort;
import org.springframework.context.ApplicationContext;
import org.springframework.test.context.DynamicPropertyRegistry;
import org.springframework.test.context.DynamicPropertySource;

/**
 * Issue 7.2 with real upstreams: content cached from a private {@code registry:2} (Basic auth,
 * credentials configured in the cache) is served by digest elsewhere only after the upstream of the
 * request confirms it with a {@code HEAD} for that repository ({@code storage.content-scope},
 * default {@code repository}; docs/security.md). Two upstreams: {@code priv.test} (htpasswd) and
 * {@code pub.test} (anonymous). The secret image and a public image share one layer.
 */
@SpringBootTest(
    classes = RegistryCacheApplication.class,
    webEnvironment = SpringBootTest.WebEnvironment.RANDOM_PORT)
class ContentScopeIT {

  private static final String USER = "puller";
  private static final String PASSWORD = "scope-Pa55word";

  // Made here, started in @BeforeAll: a failure to start then fails the class with its own
  // message, not with ExceptionInInitializerError/NoClassDefFoundError. Their addresses are fixed
  // at construction, so the cache's properties below can name them before they start.
  static final UpstreamRegistryContainer privateRegistry =
      new UpstreamRegistryContainer().withHtpasswd(USER, PASSWORD);
  static final UpstreamRegistryContainer publicRegistry = new UpstreamRegistryContainer();
  static final Path storage = TestFiles.tempDirectory("registry-cache-scope-it-");

  static final byte[] shared = TestImages.randomBytes(60_000, 71);
  static TestImages.Image secret;
  static TestImages.Image open;

  @BeforeAll
  static void startUpstreamsAndPush() {
    privateRegistry.start();
    publicRegistry.start();
    secret =
        privateRegistry
            .pusher()
            .push(
                TestImages.withLayers(
                    "team/secret", "v1", TestImages.randomBytes(50_000, 72), shared));
    open = publicRegistry.pusher().push(TestImages.withLayers("team/open", "v1", shared));
  }

  @LocalServerPort int port;
  @Autowired ApplicationContext context;
  CacheClient cache;

  @DynamicPropertySource
  static void cacheProperties(DynamicPropertyRegistry registry) {
    CacheProperties.cache(storage)
        .set("registry-cache.default-upstream", "pub")
        .set("registry-cache.upstreams.pub.host", "pub.test")
        .set("registry-cache.upstreams.pub.url", publicRegistry::baseUrl)
        .set("registry-cache.upstreams.priv.host", "priv.test")
        .set("registry-cache.upstreams.priv.url", privateRegistry::baseUrl)
        .set("registry-cache.upstreams.priv.username", USER)
        .set("registry-cache.upstreams.priv.password", PASSWORD)
        .addTo(registry);
  }

  @AfterAll
  static void stop() {
    privateRegistry.stop();
    publicRegistry.stop();
  }

  @BeforeEach
  void pullTheSecretImageThroughItsOwnUpstream() {
    cache = CacheClient.onPort(port);
    HttpResponse<byte[]> manifest = cache.getManifest("/v2/priv.test/team/secret/manifests/v1");
    assertThat(manifest.statusCode()).as(CacheClient.describe(manifest)).isEqualTo(200);
    assertThat(manifest.body()).isEqualTo(secret.manifest().bytes());
    for (TestImages.Blob blob : secret.blobs()) {
      HttpResponse<byte[]> response = cache.get("/v2/priv.test/team/secret/blobs/" + blob.digest());
      assertThat(response.statusCode()).as(CacheClient.describe(response)).isEqualTo(200);
      assertThat(response.body()).isEqualTo(blob.bytes());
    }
    // Stored (and linked for priv.test/team/secret) only once committed, just after the last byte.
    ManualCache.awaitDownloadsCommitted(context);
  }

  @Test
  void privateContentIsNotServedByDigestThroughAnotherUpstream() {
    String secretLayer = secret.layers().get(0).digest();

    HttpResponse<byte[]> blob = cache.get("/v2/pub.test/team/secret/blobs/" + secretLayer);
    HttpResponse<byte[]> manifest =
        cache.getManifest("/v2/pub.test/team/secret/manifests/" + secret.manifest().digest());
    HttpResponse<byte[]> bare = cache.get("/v2/team/secret/blobs/" + secretLayer);

    assertThat(blob.statusCode()).as(CacheClient.describe(blob)).isEqualTo(404);
    assertThat(CacheClient.errorCode(blob)).isEqualTo("BLOB_UNKNOWN");
    assertThat(manifest.statusCode()).as(CacheClient.describe(manifest)).isEqualTo(404);
    assertThat(CacheClient.errorCode(manifest)).isEqualTo("MANIFEST_UNKNOWN");
    assertThat(bare.statusCode()).as(CacheClient.describe(bare)).isEqualTo(404);
    // The public upstream was asked (and said no); none of the secret bytes reached the client.
    publicRegistry.syncLogs();
    assertThat(
            publicRegistry.countRequests("HEAD", "/v2/team/secret/blobs/" + secretLayer)
                + publicRegistry.countRequests("GET", "/v2/team/secret/blobs/" + secretLayer))
        .isPositive();
    assertThat(new String(blob.body()))
        .doesNotContain(new String(secret.layers().get(0).bytes(), 0, 16));
  }

  @Test
  void privateContentIsNotServedUnderAnotherRepositoryOfTheSameUpstream() {
    String secretLayer = secret.layers().get(0).digest();

    HttpResponse<byte[]> blob = cache.get("/v2/priv.test/team/elsewhere/blobs/" + secretLayer);
    HttpResponse<byte[]> manifest =
        cache.getManifest("/v2/priv.test/team/elsewhere/manifests/" + secret.manifest().digest());

    assertThat(blob.statusCode()).as(CacheClient.describe(blob)).isEqualTo(404);
    assertThat(CacheClient.errorCode(blob)).isEqualTo("BLOB_UNKNOWN");
    assertThat(manifest.statusCode()).as(CacheClient.describe(manifest)).isEqualTo(404);
    assertThat(CacheClient.errorCode(manifest)).isEqualTo("MANIFEST_UNKNOWN");
  }

  @Test
  void aLayerTheOtherUpstreamConfirmsIsServedFromTheCacheAfterOneHead() {
    String sharedLayer = open.layers().get(0).digest();
    assertThat(secret.layers().get(1).digest()).isEqualTo(sharedLayer);
    String path = "/v2/team/open/blobs/" + sharedLayer;
    publicRegistry.syncLogs();
    long headsBefore = publicRegistry.countRequests("HEAD", path);
    long getsBefore = publicRegistry.countRequests("GET", path);

    HttpResponse<byte[]> first = cache.get("/v2/pub.test/team/open/blobs/" + sharedLayer);
    HttpResponse<byte[]> second = cache.get("/v2/pub.test/team/open/blobs/" + sharedLayer);

    assertThat(first.statusCode()).as(CacheClient.describe(first)).isEqualTo(200);
    assertThat(first.body()).isEqualTo(shared);
    assertThat(second.statusCode()).isEqualTo(200);
    assertThat(second.body()).isEqualTo(shared);
    publicRegistry.syncLogs();
    // Confirmed by one HEAD, then linked: the bytes came from the cache, never from this upstream.
    assertThat(publicRegistry.countRequests("HEAD", path) - headsBefore).isEqualTo(1);
    assertThat(publicRegistry.countRequests("GET", path) - getsBefore).isZero();
  }
}
