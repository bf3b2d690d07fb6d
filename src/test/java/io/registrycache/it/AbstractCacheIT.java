package io.registrycache.it;

import io.registrycache.RegistryCacheApplication;
import io.registrycache.testsupport.CacheClient;
import io.registrycache.testsupport.CacheProperties;
import io.registrycache.testsupport.TestFiles;
import io.registrycache.testsupport.UpstreamRegistryContainer;
import java.nio.file.Path;
import org.junit.jupiter.api.BeforeEach;
import org.springframework.boot.test.context.SpringBootTest;
import org.springframework.boot.test.web.server.LocalServerPort;
import org.springframework.test.context.DynamicPropertyRegistry;
import org.springframework.test.context.DynamicPropertySource;

/**
 * Base of the service-level ITs that can share one world: the real service in-process on a random
 * port, and one real {@code registry:2} upstream per JVM. Subclasses in one JVM get the same
 * Spring context (same properties, so Spring's test context cache reuses it) and the same storage
 * directory; failsafe runs each IT class in a JVM of its own ({@code reuseForks=false}), so in
 * practice that is one upstream container and one context per class. Every test pushes content
 * unique to itself ({@code TestImages.uniqueRepository}), so tests cannot see each other's cache
 * entries or upstream requests.
 *
 * <p>The upstream is configured as host {@value #UPSTREAM_HOST} (a valid path component, so the
 * in-path form {@code /v2/upstream.test/<name>/...} works with clients like skopeo) and is the
 * default upstream for bare {@code /v2/<name>/...} requests.
 */
@SpringBootTest(
    classes = RegistryCacheApplication.class,
    webEnvironment = SpringBootTest.WebEnvironment.RANDOM_PORT)
public abstract class AbstractCacheIT {

  public static final String UPSTREAM_HOST = CacheProperties.UPSTREAM_HOST;

  /** One registry:2 for every subclass; removed by Testcontainers' JVM shutdown hook. */
  public static final UpstreamRegistryContainer upstream = Shared.UPSTREAM;

  /** The cache's storage root, shared by every subclass (one Spring context). */
  public static final Path storage = Shared.STORAGE;

  @LocalServerPort protected int port;

  @org.springframework.beans.factory.annotation.Autowired
  protected org.springframework.context.ApplicationContext context;

  protected CacheClient cache;

  @DynamicPropertySource
  static void cacheProperties(DynamicPropertyRegistry registry) {
    CacheProperties.cache(storage)
        .localUpstream(UPSTREAM_HOST, upstream::baseUrl)
        .set("registry-cache.allow-any-upstream", "false")
        .set("registry-cache.manifests.tag-ttl", "1h")
        .addTo(registry);
  }

  @BeforeEach
  protected void cacheClient() {
    cache = CacheClient.onPort(port);
  }

  /** Waits until the blobs just pulled are committed to the store (clients finish before that). */
  protected void awaitDownloadsCommitted() {
    io.registrycache.testsupport.ManualCache.awaitDownloadsCommitted(context);
  }

  /** The file a blob must be stored at: {@code blobs/sha256/<first 2 hex>/<hex>}. */
  public static Path blobFile(Path root, String digest) {
    String hex = digest.substring("sha256:".length());
    return root.resolve("blobs").resolve("sha256").resolve(hex.substring(0, 2)).resolve(hex);
  }

  private static final class Shared {
    static final UpstreamRegistryContainer UPSTREAM = UpstreamRegistryContainer.started();
    static final Path STORAGE = TestFiles.tempDirectory("registry-cache-it-");
  }
}
