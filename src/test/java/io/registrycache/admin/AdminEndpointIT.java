package io.registrycache.admin;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import io.micrometer.core.instrument.MeterRegistry;
import io.registrycache.oci.Digest;
import io.registrycache.testsupport.AdvancingClock;
import io.registrycache.testsupport.CacheClient;
import io.registrycache.testsupport.CacheProperties;
import io.registrycache.testsupport.ManualCache;
import io.registrycache.testsupport.TestImages;
import io.registrycache.testsupport.TestImages.Image;
import io.registrycache.testsupport.UpstreamRegistryContainer;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Clock;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;
import org.junit.jupiter.api.io.TempDir;
import org.springframework.beans.factory.annotation.Autowired;
import org.springframework.boot.test.context.SpringBootTest;
import org.springframework.boot.test.context.TestConfiguration;
import org.springframework.boot.test.system.CapturedOutput;
import org.springframework.boot.test.system.OutputCaptureExtension;
import org.springframework.boot.test.web.server.LocalManagementPort;
import org.springframework.boot.test.web.server.LocalServerPort;
import org.springframework.context.ApplicationContext;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Import;
import org.springframework.context.annotation.Primary;
import org.springframework.test.context.DynamicPropertyRegistry;
import org.springframework.test.context.DynamicPropertySource;
import tools.jackson.databind.JsonNode;
import tools.jackson.databind.json.JsonMapper;

/**
 * The admin endpoint against the running service, registry:2 as upstream: listing, prune by pattern
 * / count / age with dry run, evicting one image and pulling it again, the access log, and that the
 * endpoint is not on the registry port.
 */
@SpringBootTest(webEnvironment = SpringBootTest.WebEnvironment.RANDOM_PORT)
@Import(AdminEndpointIT.TestClock.class)
@ExtendWith(OutputCaptureExtension.class)
class AdminEndpointIT {

  @TempDir static Path storage;

  /**
   * The service's clock: the system's, moved ahead where a test needs pulls to be apart in time.
   */
  static final AdvancingClock clock = new AdvancingClock();

  @TestConfiguration(proxyBeanMethods = false)
  static class TestClock {
    @Bean
    @Primary
    Clock testClock() {
      return clock;
    }
  }

  static final UpstreamRegistryContainer upstream = UpstreamRegistryContainer.started();

  @DynamicPropertySource
  static void properties(DynamicPropertyRegistry registry) {
    CacheProperties.cache(storage)
        .localUpstream(upstream.hostAndPort(), upstream::baseUrl)
        .set("registry-cache.storage.delete-grace", "200ms")
        .set("registry-cache.access-log.enabled", "true")
        .addTo(registry);
  }

  private static final JsonMapper JSON = JsonMapper.builder().build();

  @LocalServerPort int port;
  @Autowired ApplicationContext context;
  @LocalManagementPort int managementPort;
  @Autowired MeterRegistry meters;

  private CacheClient cache() {
    return CacheClient.onPort(port);
  }

  /**
   * Pulls and checks {@code image}, then waits until its blobs are committed (what prune and evict
   * see).
   */
  private void pull(Image image) {
    cache().pullAndVerify(image);
    ManualCache.awaitDownloadsCommitted(context);
  }

  private CacheClient management() {
    return CacheClient.onPort(managementPort);
  }

  private static String admin() {
    return "/actuator/cache";
  }

  private static Image push(String repository, String tag, byte[]... layers) {
    return upstream.pusher().push(TestImages.withLayers(repository, tag, layers));
  }

  private JsonNode getJson(String path) {
    return json(management().get(path));
  }

  private JsonNode postJson(String path, String body) {
    return json(management().postJson(path, body));
  }

  private static JsonNode json(HttpResponse<byte[]> r) {
    assertThat(r.statusCode()).as(CacheClient.describe(r)).isEqualTo(200);
    return JSON.readTree(new String(r.body(), StandardCharsets.UTF_8));
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
    byte[] base = TestImages.randomBytes(20_000, 1);
    Image a = push("list/app", "v1", base, TestImages.randomBytes(5_000, 2));
    Image b = push("list/app", "v2", base, TestImages.randomBytes(5_000, 3));
    pull(a);
    pull(b);

    JsonNode images = getJson(admin() + "/images?filter=list/app").path("images");
    assertThat(field(images, "image")).containsExactly("local/list/app:v2", "local/list/app:v1");
    JsonNode v2 = images.get(0);
    assertThat(v2.path("repository").asString()).isEqualTo("list/app");
    assertThat(v2.path("tag").asString()).isEqualTo("v2");
    assertThat(v2.path("digest").asString()).isEqualTo(b.manifest().digest());
    assertThat(v2.path("mediaType").asString())
        .isEqualTo("application/vnd.oci.image.manifest.v1+json");
    assertThat(v2.path("size").asLong()).isGreaterThan(25_000);
    assertThat(v2.path("complete").asBoolean()).isTrue();
    assertThat(v2.path("lastPulled").asString()).isNotEmpty();

    List<String> blobs = field(getJson(admin() + "/blobs").path("blobs"), "digest");
    assertThat(blobs).contains(a.blobs().get(1).digest(), b.blobs().get(2).digest());
    assertThat(getJson(admin()).path("storedBytes").asLong()).isGreaterThan(30_000);
    assertThat(management().get(admin() + "/images?filter=(").statusCode()).isEqualTo(400);
  }

  @Test
  void pruneByPatternDryRunThenForReal() throws Exception {
    Image keep = push("pat/app", "v1", TestImages.randomBytes(3_000, 10));
    Image debug = push("pat/app", "v1-debug", TestImages.randomBytes(3_000, 11));
    pull(keep);
    pull(debug);

    JsonNode dry =
        postJson(admin() + "/prune", "{\"pattern\":\"local/pat/app:.*-debug\",\"dryRun\":true}");
    assertThat(dry.path("dryRun").asBoolean()).isTrue();
    assertThat(field(dry.path("tags"), "image")).containsExactly("local/pat/app:v1-debug");
    assertThat(field(dry.path("blobs"), "digest")).contains(debug.blobs().get(1).digest());
    assertThat(images("pat/")).hasSize(2);

    JsonNode done = postJson(admin() + "/prune", "{\"pattern\":\"local/pat/app:.*-debug\"}");
    assertThat(done.path("dryRun").asBoolean()).isFalse();
    assertThat(field(done.path("manifests"), "digest")).containsExactly(debug.manifest().digest());
    assertThat(images("pat/")).containsExactly("local/pat/app:v1");
    assertThat(Files.exists(blobPath(Digest.parse(keep.blobs().get(1).digest())))).isTrue();
    assertThat(management().postJson(admin() + "/prune", "{}").statusCode()).isEqualTo(400);
  }

  @Test
  void pruneByCountAndByAge() throws Exception {
    byte[] base = TestImages.randomBytes(4_000, 20);
    Image v1 = push("cnt/app", "v1", base, TestImages.randomBytes(1_000, 21));
    Image v2 = push("cnt/app", "v2", base, TestImages.randomBytes(1_000, 22));
    Image v3 = push("cnt/app", "v3", base, TestImages.randomBytes(1_000, 23));
    pull(v1);
    clock.advance(Duration.ofMillis(1100));
    pull(v2);
    clock.advance(Duration.ofMillis(1100));
    pull(v3);

    JsonNode byCount = postJson(admin() + "/prune", "{\"keep\":1,\"pattern\":\"local/cnt/.*\"}");
    assertThat(field(byCount.path("tags"), "image"))
        .containsExactlyInAnyOrder("local/cnt/app:v1", "local/cnt/app:v2");
    assertThat(field(byCount.path("blobs"), "digest")).doesNotContain(v3.blobs().get(1).digest());
    assertThat(images("cnt/")).containsExactly("local/cnt/app:v3");

    Image fresh = push("cnt/other", "v1", TestImages.randomBytes(1_000, 24));
    // v3 is over 6 s old, fresh a pull's time: "older than 5 s" tells them apart even on a busy
    // machine.
    clock.advance(Duration.ofMillis(6100));
    pull(fresh);
    JsonNode byAge =
        postJson(admin() + "/prune", "{\"olderThan\":\"5s\",\"pattern\":\"local/cnt/.*\"}");
    assertThat(field(byAge.path("tags"), "image")).containsExactly("local/cnt/app:v3");
    assertThat(images("cnt/")).containsExactly("local/cnt/other:v1");
    // The pruned image pulls again, complete.
    pull(v3);
  }

  @Test
  void evictOneImageThenPullItAgainFromTheUpstream(CapturedOutput output) throws Exception {
    Image image = push("evict/app", "v1", TestImages.randomBytes(8_000, 30));
    pull(image);
    pull(image); // hits
    Digest layer = Digest.parse(image.blobs().get(1).digest());
    assertThat(Files.exists(blobPath(layer))).isTrue();
    double missesBefore = blobMisses();

    JsonNode evicted =
        postJson(admin() + "/evict", "{\"repository\":\"evict/app\",\"tag\":\"v1\"}");
    assertThat(field(evicted.path("manifests"), "digest"))
        .containsExactly(image.manifest().digest());
    assertThat(field(evicted.path("blobs"), "digest")).contains(layer.toString());
    assertThat(images("evict/")).isEmpty();
    await("the evicted layer's file deleted after the delete grace")
        .atMost(Duration.ofSeconds(10))
        .until(() -> !Files.exists(blobPath(layer)));

    pull(image);
    assertThat(blobMisses() - missesBefore).isEqualTo(2); // config and layer fetched again
    assertThat(images("evict/")).containsExactly("local/evict/app:v1");
    assertThat(Files.exists(blobPath(layer))).isTrue();

    // by digest
    JsonNode byDigest =
        postJson(admin() + "/evict", "{\"digest\":\"" + image.manifest().digest() + "\"}");
    assertThat(field(byDigest.path("tags"), "image")).containsExactly("local/evict/app:v1");

    // the access log saw hits and misses
    assertThat(output.getOut())
        .containsPattern(
            "method=GET path=/v2/evict/app/blobs/"
                + layer
                + " status=200 bytes=8000 duration_ms=\\d+ cache=hit upstream=local");
    assertThat(output.getOut())
        .containsPattern(
            "method=GET path=/v2/evict/app/manifests/v1 status=200 bytes=\\d+ duration_ms=\\d+ cache=miss upstream=local");
  }

  @Test
  void theAdminEndpointIsNotOnTheRegistryPort() throws Exception {
    assertThat(cache().get("/actuator/cache").statusCode()).isEqualTo(404);
    assertThat(cache().get("/actuator/cache/images").statusCode()).isEqualTo(404);
    assertThat(cache().postJson("/actuator/cache/prune", "{\"olderThan\":\"0s\"}").statusCode())
        .isIn(404, 405);
    assertThat(management().get(admin()).statusCode()).isEqualTo(200);
    assertThat(management().get(admin() + "/nope").statusCode()).isEqualTo(404);
  }

  private double blobMisses() {
    var c = meters.find("registry.cache.requests").tags("kind", "blob", "result", "miss").counter();
    return c == null ? 0 : c.count();
  }

  private static Path blobPath(Digest d) {
    return storage
        .resolve("blobs")
        .resolve(d.algorithm())
        .resolve(d.hex().substring(0, 2))
        .resolve(d.hex());
  }
}
