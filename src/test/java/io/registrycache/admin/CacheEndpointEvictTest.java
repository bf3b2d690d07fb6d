package io.registrycache.admin;

import static org.assertj.core.api.Assertions.assertThat;

import io.registrycache.storage.StorageJanitor;
import io.registrycache.testsupport.TestCache;
import io.registrycache.upstream.Upstreams;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.springframework.boot.actuate.endpoint.web.WebEndpointResponse;

/**
 * Eviction by tag names its upstream: an upstream key that is neither configured nor the upstream
 * of a cached tag (a typo) is a 404 saying so, not 200 with nothing evicted; an upstream no longer
 * configured whose tags are still cached can be evicted from.
 */
class CacheEndpointEvictTest {

  @TempDir Path root;
  private TestCache cache;
  private CacheEndpoint endpoint;

  @BeforeEach
  void setUp() {
    cache = new TestCache(root, 0, Duration.ZERO);
    CacheInventory inventory = new CacheInventory(cache.manifests, cache.blobs, cache.collector);
    Pruner pruner =
        new Pruner(
            cache.manifests,
            inventory,
            cache.collector,
            cache.clock,
            new Upstreams(cache.properties));
    endpoint =
        new CacheEndpoint(
            inventory,
            pruner,
            new StorageJanitor(cache.collector, cache.blobs, cache.manifests, cache.properties),
            null,
            null,
            cache.properties.admin());
    cache.tag("local", "app", "v1", cache.manifest(cache.blob(10), cache.blob(100)));
    cache.tag("retired", "app", "v1", cache.manifest(cache.blob(11), cache.blob(101)));
  }

  @AfterEach
  void tearDown() {
    cache.close();
  }

  private WebEndpointResponse<Object> evict(String upstream, String dryRun) {
    return endpoint.act("evict", null, null, null, dryRun, upstream, "app", "v1", null, null, null);
  }

  @SuppressWarnings("unchecked")
  private static List<Object> tags(WebEndpointResponse<Object> response) {
    assertThat(response.getStatus()).as(String.valueOf(response.getBody())).isEqualTo(200);
    return (List<Object>) ((Map<String, Object>) response.getBody()).get("tags");
  }

  @Test
  void anUpstreamNeitherConfiguredNorCachedIsA404() {
    WebEndpointResponse<Object> response = evict("lcoal", "false");

    assertThat(response.getStatus()).isEqualTo(404);
    assertThat(((Map<?, ?>) response.getBody()).get("error"))
        .isEqualTo(
            "unknown upstream 'lcoal': neither configured nor the upstream of any cached tag; upstream keys: local");
    assertThat(tags(evict("local", "true"))).as("nothing went").hasSize(1);
  }

  @Test
  void theConfiguredUpstreamAndOneKnownOnlyFromTheCacheAreEvictedFrom() {
    assertThat(tags(evict("local", "false"))).hasSize(1);
    assertThat(tags(evict("local", "false"))).as("already gone: 200, nothing evicted").isEmpty();
    assertThat(tags(evict("retired", "false"))).hasSize(1);
    assertThat(evict("retired", "false").getStatus())
        .as("nothing of it cached any more")
        .isEqualTo(404);
  }
}
