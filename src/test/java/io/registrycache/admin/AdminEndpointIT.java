package io.registrycache.admin;

import static org.assertj.core.api.Assertions.assertThat;

import io.micrometer.core.instrument.MeterRegistry;
import io.registrycache.admin.Registry2.Pushed;
import io.registrycache.oci.Digest;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;
import org.junit.jupiter.api.io.TempDir;
import org.springframework.beans.factory.annotation.Autowired;
import org.springframework.boot.test.context.SpringBootTest;
import org.springframework.boot.test.system.CapturedOutput;
import org.springframework.boot.test.system.OutputCaptureExtension;
import org.springframework.boot.test.web.server.LocalManagementPort;
import org.springframework.boot.test.web.server.LocalServerPort;
import org.springframework.test.context.DynamicPropertyRegistry;
import org.springframework.test.context.DynamicPropertySource;
import tools.jackson.databind.JsonNode;
import tools.jackson.databind.json.JsonMapper;

/**
 * The admin endpoint against the running service, registry:2 as upstream: listing, prune by
 * pattern / count / age with dry run, evicting one image and pulling it again, the access log,
 * and that the endpoint is not on the registry port.
 */
@SpringBootTest(webEnvironment = SpringBootTest.WebEnvironment.RANDOM_PORT)
@ExtendWith(OutputCaptureExtension.class)
class AdminEndpointIT {

  @TempDir static Path storage;

  @DynamicPropertySource
  static void properties(DynamicPropertyRegistry registry) {
    registry.add("registry-cache.storage.path", () -> storage.toString());
    registry.add("registry-cache.upstreams.local.url", Registry2::url);
    registry.add("registry-cache.upstreams.local.host", Registry2::hostAndPort);
    registry.add("registry-cache.storage.delete-grace", () -> "200ms");
    registry.add("registry-cache.access-log.enabled", () -> "true");
    registry.add("management.server.port", () -> "0");
  }

  private static final JsonMapper JSON = JsonMapper.builder().build();

  @LocalServerPort int port;
  @LocalManagementPort int managementPort;
  @Autowired MeterRegistry meters;

  private String cache() {
    return "http://localhost:" + port;
  }

  private String admin() {
    return "http://localhost:" + managementPort + "/actuator/cache";
  }

  private JsonNode getJson(String url) throws Exception {
    var r = Registry2.get(url);
    assertThat(r.statusCode()).as(r.body()).isEqualTo(200);
    return JSON.readTree(r.body());
  }

  private JsonNode postJson(String url, String body) throws Exception {
    var r = Registry2.post(url, body);
    assertThat(r.statusCode()).as(r.body()).isEqualTo(200);
    return JSON.readTree(r.body());
  }

  private static List<String> field(JsonNode array, String name) {
    List<String> out = new ArrayList<>();
    array.forEach(n -> out.add(n.path(name).asString()));
    return out;
  }

  private List<String> images(String filter) throws Exception {
    return field(getJson(admin() + "/images?filter=" + filter).path("images"), "image");
  }

  @Test
  void listsImagesAndBlobs() throws Exception {
    byte[] base = Registry2.random(20_000, 1);
    Pushed a = Registry2.push("list/app", "v1", base, Registry2.random(5_000, 2));
    Pushed b = Registry2.push("list/app", "v2", base, Registry2.random(5_000, 3));
    Registry2.pull(cache(), a);
    Registry2.pull(cache(), b);

    JsonNode images = getJson(admin() + "/images?filter=list/app").path("images");
    assertThat(field(images, "image")).containsExactly("local/list/app:v2", "local/list/app:v1");
    JsonNode v2 = images.get(0);
    assertThat(v2.path("repository").asString()).isEqualTo("list/app");
    assertThat(v2.path("tag").asString()).isEqualTo("v2");
    assertThat(v2.path("digest").asString()).isEqualTo(b.manifest().toString());
    assertThat(v2.path("mediaType").asString()).isEqualTo("application/vnd.oci.image.manifest.v1+json");
    assertThat(v2.path("size").asLong()).isGreaterThan(25_000);
    assertThat(v2.path("complete").asBoolean()).isTrue();
    assertThat(v2.path("lastPulled").asString()).isNotEmpty();

    List<String> blobs = field(getJson(admin() + "/blobs").path("blobs"), "digest");
    assertThat(blobs).contains(a.blobs().get(1).toString(), b.blobs().get(2).toString());
    assertThat(getJson(admin()).path("storedBytes").asLong()).isGreaterThan(30_000);
    assertThat(Registry2.get(admin() + "/images?filter=(").statusCode()).isEqualTo(400);
  }

  @Test
  void pruneByPatternDryRunThenForReal() throws Exception {
    Pushed keep = Registry2.push("pat/app", "v1", Registry2.random(3_000, 10));
    Pushed debug = Registry2.push("pat/app", "v1-debug", Registry2.random(3_000, 11));
    Registry2.pull(cache(), keep);
    Registry2.pull(cache(), debug);

    JsonNode dry = postJson(admin() + "/prune", "{\"pattern\":\"local/pat/app:.*-debug\",\"dryRun\":true}");
    assertThat(dry.path("dryRun").asBoolean()).isTrue();
    assertThat(field(dry.path("tags"), "image")).containsExactly("local/pat/app:v1-debug");
    assertThat(field(dry.path("blobs"), "digest")).contains(debug.blobs().get(1).toString());
    assertThat(images("pat/")).hasSize(2);

    JsonNode done = postJson(admin() + "/prune", "{\"pattern\":\"local/pat/app:.*-debug\"}");
    assertThat(done.path("dryRun").asBoolean()).isFalse();
    assertThat(field(done.path("manifests"), "digest")).containsExactly(debug.manifest().toString());
    assertThat(images("pat/")).containsExactly("local/pat/app:v1");
    assertThat(Files.exists(blobPath(keep.blobs().get(1)))).isTrue();
    assertThat(Registry2.post(admin() + "/prune", "{}").statusCode()).isEqualTo(400);
  }

  @Test
  void pruneByCountAndByAge() throws Exception {
    byte[] base = Registry2.random(4_000, 20);
    Pushed v1 = Registry2.push("cnt/app", "v1", base, Registry2.random(1_000, 21));
    Pushed v2 = Registry2.push("cnt/app", "v2", base, Registry2.random(1_000, 22));
    Pushed v3 = Registry2.push("cnt/app", "v3", base, Registry2.random(1_000, 23));
    Registry2.pull(cache(), v1);
    Thread.sleep(1100);
    Registry2.pull(cache(), v2);
    Thread.sleep(1100);
    Registry2.pull(cache(), v3);

    JsonNode byCount = postJson(admin() + "/prune", "{\"keep\":1,\"pattern\":\"local/cnt/.*\"}");
    assertThat(field(byCount.path("tags"), "image")).containsExactlyInAnyOrder("local/cnt/app:v1", "local/cnt/app:v2");
    assertThat(field(byCount.path("blobs"), "digest")).doesNotContain(v3.blobs().get(1).toString());
    assertThat(images("cnt/")).containsExactly("local/cnt/app:v3");

    Pushed fresh = Registry2.push("cnt/other", "v1", Registry2.random(1_000, 24));
    Thread.sleep(2100);
    Registry2.pull(cache(), fresh);
    JsonNode byAge = postJson(admin() + "/prune", "{\"olderThan\":\"2s\",\"pattern\":\"local/cnt/.*\"}");
    assertThat(field(byAge.path("tags"), "image")).containsExactly("local/cnt/app:v3");
    assertThat(images("cnt/")).containsExactly("local/cnt/other:v1");
    // The pruned image pulls again, complete.
    Registry2.pull(cache(), v3);
  }

  @Test
  void evictOneImageThenPullItAgainFromTheUpstream(CapturedOutput output) throws Exception {
    Pushed image = Registry2.push("evict/app", "v1", Registry2.random(8_000, 30));
    Registry2.pull(cache(), image);
    Registry2.pull(cache(), image); // hits
    Digest layer = image.blobs().get(1);
    assertThat(Files.exists(blobPath(layer))).isTrue();
    double missesBefore = blobMisses();

    JsonNode evicted = postJson(admin() + "/evict", "{\"repository\":\"evict/app\",\"tag\":\"v1\"}");
    assertThat(field(evicted.path("manifests"), "digest")).containsExactly(image.manifest().toString());
    assertThat(field(evicted.path("blobs"), "digest")).contains(layer.toString());
    assertThat(images("evict/")).isEmpty();
    Thread.sleep(500); // the delete grace
    assertThat(Files.exists(blobPath(layer))).isFalse();

    Registry2.pull(cache(), image);
    assertThat(blobMisses() - missesBefore).isEqualTo(2); // config and layer fetched again
    assertThat(images("evict/")).containsExactly("local/evict/app:v1");
    assertThat(Files.exists(blobPath(layer))).isTrue();

    // by digest
    JsonNode byDigest = postJson(admin() + "/evict", "{\"digest\":\"" + image.manifest() + "\"}");
    assertThat(field(byDigest.path("tags"), "image")).containsExactly("local/evict/app:v1");

    // the access log saw hits and misses
    assertThat(output.getOut()).containsPattern(
        "method=GET path=/v2/evict/app/blobs/" + layer + " status=200 bytes=8000 duration_ms=\\d+ cache=hit upstream=local");
    assertThat(output.getOut()).containsPattern(
        "method=GET path=/v2/evict/app/manifests/v1 status=200 bytes=\\d+ duration_ms=\\d+ cache=miss upstream=local");
  }

  @Test
  void theAdminEndpointIsNotOnTheRegistryPort() throws Exception {
    assertThat(Registry2.get(cache() + "/actuator/cache").statusCode()).isEqualTo(404);
    assertThat(Registry2.get(cache() + "/actuator/cache/images").statusCode()).isEqualTo(404);
    assertThat(Registry2.post(cache() + "/actuator/cache/prune", "{\"olderThan\":\"0s\"}").statusCode())
        .isIn(404, 405);
    assertThat(Registry2.get(admin()).statusCode()).isEqualTo(200);
    assertThat(Registry2.get(admin() + "/nope").statusCode()).isEqualTo(404);
  }

  private double blobMisses() {
    var c = meters.find("registry.cache.requests").tags("kind", "blob", "result", "miss").counter();
    return c == null ? 0 : c.count();
  }

  private static Path blobPath(Digest d) {
    return storage.resolve("blobs").resolve(d.algorithm()).resolve(d.hex().substring(0, 2)).resolve(d.hex());
  }
}
