package io.registrycache.upstream;

import static io.registrycache.testsupport.CacheClient.describe;
import static org.assertj.core.api.Assertions.assertThat;

import com.jayway.jsonpath.JsonPath;
import io.registrycache.RegistryCacheApplication;
import io.registrycache.testsupport.CacheClient;
import io.registrycache.testsupport.CacheProperties;
import io.registrycache.testsupport.Sha256;
import io.registrycache.testsupport.TestCache;
import io.registrycache.testsupport.TestFiles;
import io.registrycache.testsupport.TestImages;
import io.registrycache.testsupport.TestImages.Image;
import io.registrycache.testsupport.UpstreamRegistryContainer;
import java.io.IOException;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.time.Clock;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.Test;
import org.springframework.boot.test.context.SpringBootTest;
import org.springframework.boot.test.context.TestConfiguration;
import org.springframework.boot.test.web.server.LocalManagementPort;
import org.springframework.boot.test.web.server.LocalServerPort;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Primary;
import org.springframework.test.context.DynamicPropertyRegistry;
import org.springframework.test.context.DynamicPropertySource;

/**
 * The service in-process in front of a real {@code registry:2}: when the registry stops, the
 * breaker of the upstream opens after its window, and a tag past its TTL is then served stale at
 * once instead of after retries; health and metrics show the open breaker, readiness stays UP; when
 * the registry is back, the breaker closes after {@code wait-in-open}. The service's clock is the
 * test's, moved by hand past the tag TTL and the wait in open.
 */
@SpringBootTest(
    classes = {RegistryCacheApplication.class, UpstreamResilienceIT.TestClock.class},
    webEnvironment = SpringBootTest.WebEnvironment.RANDOM_PORT)
class UpstreamResilienceIT {

  static final UpstreamRegistryContainer upstream = UpstreamRegistryContainer.started();
  static final Path storage = TestFiles.tempDirectory("registry-cache-resilience-it-");

  static final Duration WAIT_IN_OPEN = Duration.ofSeconds(4);
  static final Duration READ_TIMEOUT = Duration.ofSeconds(10);

  /** The service's clock (tag TTL, the breaker's wait in open): moves only when the test says. */
  static final TestCache.MutableClock clock = new TestCache.MutableClock();

  @TestConfiguration(proxyBeanMethods = false)
  static class TestClock {
    @Bean
    @Primary
    Clock testClock() {
      return clock;
    }
  }

  @LocalServerPort int port;
  @LocalManagementPort int managementPort;

  @DynamicPropertySource
  static void properties(DynamicPropertyRegistry registry) {
    CacheProperties.cache(storage)
        .localUpstream(upstream::baseUrl)
        .upstream("connect-timeout", "2s")
        .upstream("read-timeout", READ_TIMEOUT.toSeconds() + "s")
        .upstream("circuit-breaker.sliding-window-size", "4")
        .upstream("circuit-breaker.minimum-number-of-calls", "4")
        .upstream("circuit-breaker.wait-in-open", WAIT_IN_OPEN.toSeconds() + "s")
        .upstream("circuit-breaker.permitted-calls-in-half-open", "1")
        .set("registry-cache.manifests.tag-ttl", "1s")
        .addTo(registry);
  }

  @AfterAll
  static void cleanUp() throws IOException {
    upstream.stop();
    TestFiles.deleteRecursively(storage);
  }

  @Test
  void staleTagServedAtOnceWhileTheBreakerIsOpenAndVisibleInHealthAndMetrics() throws Exception {
    CacheClient cache = CacheClient.onPort(port).withTimeout(Duration.ofSeconds(60));
    CacheClient management = CacheClient.onPort(managementPort);
    Image image =
        upstream
            .pusher()
            .push(TestImages.smallOci(TestImages.uniqueRepository("resilience"), "v1"));
    String tagPath = "/v2/" + image.repository() + "/manifests/v1";

    // 1. pulled through while the upstream is up
    assertManifest(cache.getManifest(tagPath), image);
    for (TestImages.Blob blob : image.blobs()) {
      HttpResponse<byte[]> response =
          cache.get("/v2/" + image.repository() + "/blobs/" + blob.digest());
      assertThat(response.statusCode()).as(describe(response)).isEqualTo(200);
      assertThat(Sha256.digest(response.body())).isEqualTo(blob.digest());
    }
    assertThat(circuit(management)).isEqualTo("CLOSED");

    // 2. the upstream goes away; the tag's TTL passes
    upstream.stopUpstream();
    clock.advance(Duration.ofMillis(1200));

    // 3. pulls by tag: stale every time; slow (retries) until the breaker opens, then at once
    List<Long> millis = new ArrayList<>();
    List<String> circuitAfter = new ArrayList<>();
    for (int i = 0; i < 6; i++) {
      long start = System.nanoTime();
      assertManifest(cache.getManifest(tagPath), image);
      millis.add(Duration.ofNanos(System.nanoTime() - start).toMillis());
      circuitAfter.add(circuit(management));
    }
    System.out.println(
        "stale pulls with the upstream stopped, ms: "
            + millis
            + ", circuit after each: "
            + circuitAfter);
    assertThat(circuitAfter.get(circuitAfter.size() - 1)).isEqualTo("OPEN");
    int opened = circuitAfter.indexOf("OPEN");
    assertThat(opened).as("the window (4 attempts) is full by the 2nd pull").isLessThanOrEqualTo(1);
    for (long ms : millis.subList(opened + 1, millis.size())) {
      assertThat(ms).as("stale answer with the breaker open").isLessThan(500);
    }

    // tags list: the cached tags, at once
    long start = System.nanoTime();
    HttpResponse<byte[]> tags = cache.get("/v2/" + image.repository() + "/tags/list");
    long tagsMillis = Duration.ofNanos(System.nanoTime() - start).toMillis();
    assertThat(tags.statusCode()).as(describe(tags)).isEqualTo(200);
    assertThat(new String(tags.body(), StandardCharsets.UTF_8)).contains("\"v1\"");
    assertThat(tagsMillis).isLessThan(500);

    // something never cached: 503 naming the upstream and the open circuit, at once
    start = System.nanoTime();
    HttpResponse<byte[]> missing =
        cache.get("/v2/" + image.repository() + "/blobs/" + TestImages.unknownDigest());
    long missingMillis = Duration.ofNanos(System.nanoTime() - start).toMillis();
    assertThat(missing.statusCode()).as(describe(missing)).isEqualTo(503);
    assertThat(CacheClient.errorMessage(missing))
        .contains("upstream 'local'")
        .contains("circuit open");
    assertThat(missing.headers().firstValue("Retry-After")).isPresent();
    assertThat(missingMillis).isLessThan(500);
    System.out.println(
        "with the breaker open: tags list "
            + tagsMillis
            + " ms, uncached blob 503 in "
            + missingMillis
            + " ms");

    // 4. health: DEGRADED with HTTP 200, the upstream's breaker in the details; readiness UP
    HttpResponse<byte[]> health = management.get("/actuator/health");
    String healthJson = new String(health.body(), StandardCharsets.UTF_8);
    assertThat(health.statusCode()).as(healthJson).isEqualTo(200);
    assertThat((String) JsonPath.read(healthJson, "$.status")).isEqualTo("DEGRADED");
    assertThat((String) JsonPath.read(healthJson, "$.components.upstreams.status"))
        .isEqualTo("DEGRADED");
    assertThat((String) JsonPath.read(healthJson, "$.components.upstreams.details.local.circuit"))
        .isEqualTo("OPEN");
    assertThat(
            (String) JsonPath.read(healthJson, "$.components.upstreams.details.local.lastFailure"))
        .contains("unreachable");
    HttpResponse<byte[]> readiness = management.get("/actuator/health/readiness");
    assertThat(readiness.statusCode()).isEqualTo(200);
    assertThat(new String(readiness.body(), StandardCharsets.UTF_8)).contains("\"UP\"");

    // 5. metrics
    String prometheus =
        new String(management.get("/actuator/prometheus").body(), StandardCharsets.UTF_8);
    assertThat(prometheus)
        .contains("registry_cache_upstream_circuit_state{state=\"open\",upstream=\"local\"} 1.0")
        .contains("registry_cache_upstream_circuit_state{state=\"closed\",upstream=\"local\"} 0.0")
        .containsPattern("registry_cache_upstream_retries_total\\{upstream=\"local\"} [1-9]")
        .containsPattern(
            "registry_cache_upstream_circuit_rejected_total\\{upstream=\"local\"} [1-9]")
        .containsPattern(
            "registry_cache_stale_served_total\\{reason=\"upstream_unavailable\",upstream=\"local\"} [1-9]");

    // 6. the upstream is back: after wait-in-open one trial request closes the breaker
    upstream.startUpstream();
    clock.advance(WAIT_IN_OPEN.plusMillis(200));
    assertManifest(cache.getManifest(tagPath), image);
    assertThat(circuit(management)).isEqualTo("CLOSED");
    HttpResponse<byte[]> healthy = management.get("/actuator/health");
    assertThat(
            (String) JsonPath.read(new String(healthy.body(), StandardCharsets.UTF_8), "$.status"))
        .isEqualTo("UP");
  }

  private static String circuit(CacheClient management) {
    HttpResponse<byte[]> response = management.get("/actuator/health/upstreams");
    return JsonPath.read(
        new String(response.body(), StandardCharsets.UTF_8), "$.details.local.circuit");
  }

  private static void assertManifest(HttpResponse<byte[]> response, Image image) {
    assertThat(response.statusCode()).as(describe(response)).isEqualTo(200);
    assertThat(response.body()).isEqualTo(image.manifest().bytes());
  }
}
