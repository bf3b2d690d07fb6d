package io.registrycache.it;

import io.registrycache.RegistryCacheApplication;
import io.registrycache.testsupport.CacheClient;
import io.registrycache.testsupport.CacheProperties;
import io.registrycache.testsupport.ManualCache;
import io.registrycache.testsupport.TestFiles;
import io.registrycache.testsupport.UpstreamRegistryContainer;
import java.nio.file.Path;
import org.junit.jupiter.api.BeforeEach;
import org.springframework.beans.factory.annotation.Autowired;
import org.springframework.boot.test.context.SpringBootTest;
import org.springframework.boot.test.web.server.LocalServerPort;
import org.springframework.context.ApplicationContext;
import org.springframework.test.context.DynamicPropertyRegistry;
import org.springframework.test.context.DynamicPropertySource;

/**
 * Base of the service-level ITs that can share one world: the real service in-process on a random
 * port, and one real {@code registry:2} upstream per JVM. Subclasses in one JVM get the same Spring
 * context (same properties, so Spring's test context cache reuses it); failsafe runs IT classes one
 * after another in each of its reused JVMs (docs/testing.md), so subclasses that add no properties
 * of their own share one upstream container and one context. Each context gets a storage directory
 * of its own ({@link #storage}): a subclass with properties of its own (say S3 storage) has another
 * context, alive in the same JVM, and must not see the other's files. Every test pushes content
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

  /**
   * The storage root of this test's context: a new directory for each context, shared by the
   * subclasses that share the context. Set before each test.
   */
  protected Path storage;

  @LocalServerPort protected int port;

  @Autowired protected ApplicationContext context;

  protected CacheClient cache;

  @DynamicPropertySource
  static void cacheProperties(DynamicPropertyRegistry registry) {
    // called once for each context Spring builds
    CacheProperties.cache(TestFiles.tempDirectory("registry-cache-it-"))
        .localUpstream(UPSTREAM_HOST, upstream::baseUrl)
        .set("registry-cache.allow-any-upstream", "false")
        .set("registry-cache.manifests.tag-ttl", "1h")
        .addTo(registry);
  }

  @BeforeEach
  protected void cacheClient() {
    cache = CacheClient.onPort(port);
    storage = Path.of(context.getEnvironment().getRequiredProperty("registry-cache.storage.path"));
  }

  /** Waits until the blobs just pulled are committed to the store (clients finish before that). */
  protected void awaitDownloadsCommitted() {
    ManualCache.awaitDownloadsCommitted(context);
  }

  /** The file a blob must be stored at: {@code blobs/sha256/<first 2 hex>/<hex>}. */
  public static Path blobFile(Path root, String digest) {
    String hex = digest.substring("sha256:".length());
    return root.resolve("blobs").resolve("sha256").resolve(hex.substring(0, 2)).resolve(hex);
  }

  private static final class Shared {
    static final UpstreamRegistryContainer UPSTREAM = UpstreamRegistryContainer.started();
  }
}
