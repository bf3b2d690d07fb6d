package io.registrycache.admin;

import static org.assertj.core.api.Assertions.assertThat;

import io.registrycache.config.RegistryCacheProperties;
import io.registrycache.oci.Digest;
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
 * The admin API's client-supplied regular expressions (issue 7 point 6): RE2 semantics (linear
 * time, so no catastrophic backtracking), a length cap, 400 for what RE2 does not accept.
 */
class CacheEndpointPatternTest {

  /** Took 2.5 s with java.util.regex at this length, doubling per added character. */
  private static final String PATHOLOGICAL = "^sha256:[0-9a-f]{46}(([0-9a-f]*)*)*!";

  @TempDir Path root;
  private TestCache cache;
  private CacheEndpoint endpoint;
  private Digest blob;

  @BeforeEach
  void setUp() {
    cache = new TestCache(root, 0, Duration.ZERO);
    endpoint = endpoint(cache.properties);
    blob = cache.blob(100);
    cache.tag("local", "app", "v1", cache.manifest(cache.blob(10), blob));
  }

  private CacheEndpoint endpoint(RegistryCacheProperties properties) {
    CacheInventory inventory = new CacheInventory(cache.manifests, cache.blobs, cache.collector);
    Pruner pruner =
        new Pruner(
            cache.manifests, inventory, cache.collector, cache.clock, new Upstreams(properties));
    return new CacheEndpoint(
        inventory,
        pruner,
        new StorageJanitor(cache.collector, cache.blobs, cache.manifests, properties),
        null,
        null,
        properties.admin());
  }

  @AfterEach
  void tearDown() {
    cache.close();
  }

  @SuppressWarnings("unchecked")
  private List<Map<String, Object>> listed(WebEndpointResponse<Object> response, String key) {
    assertThat(response.getStatus()).isEqualTo(200);
    return (List<Map<String, Object>>) ((Map<String, Object>) response.getBody()).get(key);
  }

  private static String error(WebEndpointResponse<Object> response) {
    assertThat(response.getStatus()).isEqualTo(400);
    return String.valueOf(((Map<?, ?>) response.getBody()).get("error"));
  }

  @Test
  void theBacktrackingPatternFromTheIssueIsAnsweredCorrectly() {
    // No digest ends in '!': an empty list, not a thread busy for seconds.
    assertThat(listed(endpoint.list("blobs", PATHOLOGICAL), "blobs")).isEmpty();
    String prefix = blob.toString().substring(0, 20);
    assertThat(listed(endpoint.list("blobs", "^" + prefix + "(([0-9a-f]*)*)*$"), "blobs"))
        .extracting(b -> b.get("digest"))
        .containsExactly(blob.toString());
  }

  @Test
  void backreferencesAndLookaroundAreRefusedAsNotRe2() {
    assertThat(error(endpoint.list("images", "(app)\\1"))).contains("RE2");
    assertThat(error(endpoint.list("blobs", "sha256:(?=a)"))).contains("RE2");
    assertThat(
            error(
                endpoint.act(
                    "prune", null, "(?!x).*", null, "true", null, null, null, null, null, null)))
        .startsWith("pattern is not a regular expression in RE2 syntax");
  }

  @Test
  void tooLongPatternsAreRefused() {
    endpoint =
        endpoint(
            RegistryCacheProperties.bind(
                Map.of(
                    "registry-cache.storage.path",
                    root.toString(),
                    "registry-cache.admin.max-pattern-length",
                    "16")));
    assertThat(error(endpoint.list("images", "local/app:v1|local/app:v2")))
        .isEqualTo("filter is longer than 16 characters");
    assertThat(listed(endpoint.list("images", "local/app:v1"), "images")).hasSize(1);
  }

  @Test
  void pruneMatchesWithRe2Semantics() {
    WebEndpointResponse<Object> r =
        endpoint.act(
            "prune", null, "local/app:v\\d", null, "true", null, null, null, null, null, null);
    assertThat(r.getStatus()).isEqualTo(200);
    assertThat((List<?>) ((Map<?, ?>) r.getBody()).get("tags")).hasSize(1);
  }
}
