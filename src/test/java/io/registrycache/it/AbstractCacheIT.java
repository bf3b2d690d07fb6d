package io.registrycache.it;

import io.registrycache.RegistryCacheApplication;
import io.registrycache.testsupport.CacheClient;
import io.registrycache.testsupport.UpstreamRegistryContainer;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.file.Files;
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
abstract class AbstractCacheIT {

  static final String UPSTREAM_HOST = "upstream.test";

  /** One registry:2 for every subclass; removed by Testcontainers' JVM shutdown hook. */
  static final UpstreamRegistryContainer upstream = Shared.UPSTREAM;

  /** The cache's storage root, shared by every subclass (one Spring context). */
  static final Path storage = Shared.STORAGE;

  @LocalServerPort int port;

  CacheClient cache;

  @DynamicPropertySource
  static void cacheProperties(DynamicPropertyRegistry registry) {
    registry.add("registry-cache.storage.path", storage::toString);
    registry.add("registry-cache.default-upstream", () -> "local");
    registry.add("registry-cache.allow-any-upstream", () -> "false");
    registry.add("registry-cache.upstreams.local.host", () -> UPSTREAM_HOST);
    registry.add("registry-cache.upstreams.local.url", upstream::baseUrl);
    registry.add("registry-cache.manifests.tag-ttl", () -> "1h");
    registry.add("management.server.port", () -> "0");
  }

  @BeforeEach
  void cacheClient() {
    cache = CacheClient.onPort(port);
  }

  /** The file a blob must be stored at: {@code blobs/sha256/<first 2 hex>/<hex>}. */
  static Path blobFile(Path root, String digest) {
    String hex = digest.substring("sha256:".length());
    return root.resolve("blobs").resolve("sha256").resolve(hex.substring(0, 2)).resolve(hex);
  }

  private static final class Shared {
    static final UpstreamRegistryContainer UPSTREAM = startUpstream();
    static final Path STORAGE = createStorage();

    private static UpstreamRegistryContainer startUpstream() {
      UpstreamRegistryContainer container = new UpstreamRegistryContainer();
      container.start();
      return container;
    }

    private static Path createStorage() {
      try {
        Path dir = Files.createTempDirectory("registry-cache-it-");
        Runtime.getRuntime().addShutdownHook(new Thread(() -> TestFiles.deleteRecursively(dir)));
        return dir;
      } catch (IOException e) {
        throw new UncheckedIOException(e);
      }
    }
  }
}
