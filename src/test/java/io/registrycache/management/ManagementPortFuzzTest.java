package io.registrycache.management;

import static org.assertj.core.api.Assertions.assertThat;

import com.code_intelligence.jazzer.api.BugDetectors;
import com.code_intelligence.jazzer.api.FuzzedDataProvider;
import com.code_intelligence.jazzer.api.SilentCloseable;
import com.code_intelligence.jazzer.junit.FuzzTest;
import io.registrycache.RegistryCacheApplication;
import io.registrycache.testsupport.CacheProperties;
import io.registrycache.testsupport.RawHttp;
import io.registrycache.testsupport.TestFiles;
import java.net.InetAddress;
import java.net.URI;
import java.net.UnknownHostException;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Set;
import org.junit.jupiter.api.AfterAll;
import org.springframework.boot.builder.SpringApplicationBuilder;
import org.springframework.context.ConfigurableApplicationContext;
import tools.jackson.databind.JsonNode;
import tools.jackson.databind.json.JsonMapper;

/**
 * Fuzzes the management port of the running service, a token set: request targets built from the
 * actuator's path segments, encodings ({@code %xx} in either case, {@code ;} parameters, dot
 * segments, doubled and encoded slashes, backslashes) and whatever else the fuzzer makes, with
 * methods, {@code Authorization} (never the token), {@code Host}, forwarded and other headers and a
 * body. Every answer must be below 500, and no request may reach the handler of a protected
 * endpoint (every link of {@code /actuator} but health and prometheus), by the pattern WebFlux
 * matched ({@link HandlerProbe}).
 *
 * <p>Normal test runs replay the inputs committed under {@code
 * src/test/resources/io/registrycache/management/ManagementPortFuzzTestInputs/anonymousRequests};
 * {@code JAZZER_FUZZ=1} fuzzes (docs/testing.md, "Fuzzing").
 */
class ManagementPortFuzzTest {

  static final String TOKEN = "fuzz-management-token-4e7b1";
  private static final JsonMapper JSON = JsonMapper.builder().build();

  private static final String[] METHODS = {
    "GET", "POST", "HEAD", "OPTIONS", "PUT", "DELETE", "PATCH", "TRACE", "CONNECT", "get", "BREW"
  };
  private static final String[] SEGMENTS = {
    "actuator",
    "cache",
    "images",
    "blobs",
    "preload",
    "janitor",
    "prune",
    "evict",
    "health",
    "liveness",
    "readiness",
    "prometheus",
    "metrics",
    "info",
    "jvm.threads.live",
    "diskSpace",
    "v2",
    "",
    ".",
    "..",
    "%2e",
    "%2E%2e",
    ".%2e",
    "%61ctuator",
    "ACTUATOR",
    "c%61che",
    "C%41CHE",
    "h%65alth",
    "%68%65%61%6C%74%68",
    "actuator;x=y",
    "cache;",
    "health;a=b",
    "..;",
    "%2F",
    "%2f",
    "%5C",
    "\\",
    "%25",
    "%252e",
    "%00",
    "%c0%ae",
    "%u002e",
    "~",
    "*",
    "{what}"
  };
  private static final String[] HEADER_NAMES = {
    "Authorization",
    "X-Forwarded-For",
    "Forwarded",
    "X-Forwarded-Prefix",
    "X-Forwarded-Host",
    "X-Forwarded-Proto",
    "X-Forwarded-Port",
    "Host",
    "Content-Type",
    "Accept",
    "Origin",
    "Access-Control-Request-Method",
    "Cookie",
    "X-HTTP-Method-Override",
    "X-Original-URL",
    "X-Rewrite-URL"
  };

  private static ConfigurableApplicationContext service;

  /**
   * Why the service did not start, so that later inputs fail at once instead of starting it again.
   */
  private static Exception failedStart;

  private static int port;
  private static Set<String> protectedPatterns;

  /** Starts the service on first use, so that its classes load after Jazzer's agent is in place. */
  private static synchronized void start() throws Exception {
    if (service != null) {
      return;
    }
    if (failedStart != null) {
      throw new IllegalStateException("the service did not start", failedStart);
    }
    try {
      startService();
    } catch (Exception e) {
      failedStart = e;
      throw e;
    }
  }

  private static void startService() throws Exception {
    List<String> args = new ArrayList<>(List.of("--server.port=0"));
    args.addAll(
        CacheProperties.cache(TestFiles.tempDirectory("registry-cache-management-fuzz-"))
            .set("registry-cache.admin.token", TOKEN)
            .set("registry-cache.admin.warm-up-pulls", "0")
            .asArguments());
    service =
        new SpringApplicationBuilder(RegistryCacheApplication.class, HandlerProbe.class)
            .run(args.toArray(String[]::new));
    port = Integer.parseInt(service.getEnvironment().getRequiredProperty("local.management.port"));
    RawHttp.Response links;
    try (SilentCloseable loopback = loopbackOnly()) {
      links = RawHttp.get(port, "/actuator", "Authorization: Bearer " + TOKEN);
    }
    assertThat(links.status()).as(links.toString()).isEqualTo(200);
    Set<String> patterns = new LinkedHashSet<>();
    for (Map.Entry<String, JsonNode> link :
        JSON.readTree(links.bodyText()).path("_links").properties()) {
      if (!Set.of("health", "health-path", "prometheus").contains(link.getKey())) {
        patterns.add(
            URI.create(
                    link.getValue().path("href").asString().replace("{", "%7B").replace("}", "%7D"))
                .getPath());
      }
    }
    assertThat(patterns)
        .contains("/actuator", "/actuator/cache", "/actuator/cache/{what}", "/actuator/metrics");
    protectedPatterns = patterns;
  }

  /** Jazzer's network sanitizer flags connections: the ones made here go to loopback only. */
  private static SilentCloseable loopbackOnly() {
    return BugDetectors.allowNetworkConnections((host, p) -> isLoopback(host));
  }

  private static boolean isLoopback(String host) {
    try {
      return InetAddress.getByName(host).isLoopbackAddress();
    } catch (UnknownHostException e) {
      return false;
    }
  }

  @AfterAll
  static synchronized void stop() {
    if (service != null) {
      service.close();
      service = null;
    }
  }

  /** A request target: actuator segments and encodings, the fuzzer's own bytes, or both. */
  private static String target(FuzzedDataProvider data) {
    StringBuilder target = new StringBuilder();
    int segments = data.consumeInt(0, 6);
    for (int i = 0; i < segments; i++) {
      target.append(
          data.consumeBoolean()
              ? "/"
              : data.pickValue(new String[] {"//", "%2F", "\\", "/./", "/../"}));
      target.append(data.consumeBoolean() ? data.pickValue(SEGMENTS) : data.consumeString(12));
    }
    if (target.length() == 0 || data.consumeBoolean()) {
      target.append(data.consumeString(40));
    }
    String t = target.toString();
    return (t.startsWith("/") || t.startsWith("*") || t.startsWith("http") ? t : "/" + t)
        .replace("\r", "")
        .replace("\n", "")
        .replace(" ", "%20");
  }

  @FuzzTest(maxDuration = "10m")
  void anonymousRequests(FuzzedDataProvider data) throws Exception {
    start();
    String method = data.pickValue(METHODS);
    String target = target(data);
    List<String> headers = new ArrayList<>();
    String probe = HandlerProbe.nextId();
    headers.add(HandlerProbe.HEADER + ": " + probe);
    for (int i = data.consumeInt(0, 4); i > 0; i--) {
      String name = data.pickValue(HEADER_NAMES);
      String value =
          name.equals("Authorization")
              ? data.pickValue(new String[] {"Bearer ", "bearer ", "Basic ", "", "Bearer  "})
                  + data.consumeString(48)
              : data.consumeString(48);
      String clean = value.replace("\r", "").replace("\n", "");
      assertThat(clean).doesNotContain(TOKEN);
      headers.add(name + ": " + clean);
    }
    if (headers.stream().noneMatch(h -> h.startsWith("Host: "))) {
      headers.add(RawHttp.host(port));
    }
    byte[] body = data.consumeRemainingAsBytes();
    if (body.length > 0) {
      headers.add("Content-Length: " + body.length);
    }
    RawHttp.Response answer;
    try (SilentCloseable loopback = loopbackOnly()) {
      answer = RawHttp.send(port, method, target, headers, body);
    }
    Optional<String> reached = HandlerProbe.matchedPattern(probe);
    String what = method + " " + target + " " + headers + " -> " + answer;
    assertThat(answer.status()).as(what).isLessThan(500);
    reached.ifPresent(
        pattern ->
            assertThat(protectedPatterns).as(what + " reached " + pattern).doesNotContain(pattern));
    if (answer.status() >= 200 && answer.status() < 300) {
      assertThat(new String(answer.body(), StandardCharsets.UTF_8))
          .as(what)
          .doesNotContain("\"_links\"")
          .doesNotContain("storedBytes")
          .doesNotContain("\"names\"");
    }
  }
}
