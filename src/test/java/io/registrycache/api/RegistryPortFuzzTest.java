package io.registrycache.api;

import static org.assertj.core.api.Assertions.assertThat;

import com.code_intelligence.jazzer.api.BugDetectors;
import com.code_intelligence.jazzer.api.FuzzedDataProvider;
import com.code_intelligence.jazzer.api.SilentCloseable;
import com.code_intelligence.jazzer.junit.FuzzTest;
import io.registrycache.testsupport.CacheProperties;
import io.registrycache.testsupport.ManualCache;
import io.registrycache.testsupport.RawHttp;
import io.registrycache.testsupport.ScriptedHttp;
import io.registrycache.testsupport.TestFiles;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Base64;
import java.util.List;
import org.junit.jupiter.api.AfterAll;
import org.springframework.security.crypto.bcrypt.BCryptPasswordEncoder;

/**
 * Fuzzes the registry port with requests real clients would not send: request targets (any form,
 * any escape), {@code Host} values, {@code Authorization} values and token endpoint bodies, against
 * the service with authentication and the token flow on, in front of an upstream that knows nothing
 * (so every upstream answer is a 404). Whatever comes in, the answer is never a 5xx, and every
 * error answer to a GET has an OCI error body ({@code {"errors":[...]}}), or the token endpoint's
 * RFC 6749 error body.
 *
 * <p>In a plain {@code ./mvnw verify} this replays the inputs committed under {@code
 * src/test/resources/io/registrycache/api/RegistryPortFuzzTestInputs/}; with {@code JAZZER_FUZZ=1}
 * it fuzzes (docs/testing.md).
 */
class RegistryPortFuzzTest {

  static final ScriptedHttp upstream = new ScriptedHttp();
  static final Path storage = TestFiles.tempDirectory("registry-cache-fuzz-");
  static ManualCache cache;
  static int port;

  static final List<String> METHODS =
      List.of("GET", "HEAD", "POST", "PUT", "DELETE", "PATCH", "OPTIONS");
  static final List<String> PREFIXES =
      List.of(
          "/v2/",
          "/v2/app/manifests/",
          "/v2/app/blobs/",
          "/v2/app/tags/list",
          "/v2/app/referrers/",
          "/v2/token",
          "http://localhost/v2/",
          "/",
          "");

  /** Starts the service on first use, so that its classes load after Jazzer's agent is in place. */
  private static synchronized void start() throws IOException {
    if (cache != null) {
      return;
    }
    Files.writeString(
        storage.resolve("htpasswd"),
        "alice:" + new BCryptPasswordEncoder(4).encode("s3cret") + "\n");
    cache =
        ManualCache.start(
            CacheProperties.cache(storage.resolve("cache"))
                .localUpstream(upstream::baseUrl)
                .upstream("retry.max-attempts", "1")
                .upstream("circuit-breaker.enabled", "false")
                .set("registry-cache.auth.enabled", "true")
                .set("registry-cache.auth.htpasswd-file", storage.resolve("htpasswd").toString())
                .set("registry-cache.auth.token.enabled", "true")
                .set("registry-cache.auth.rules[0].subjects", "user:alice")
                .set("registry-cache.auth.rules[0].repositories", "*")
                .set("registry-cache.admin.warm-up-pulls", "0"));
    port =
        Integer.parseInt(cache.context().getEnvironment().getRequiredProperty("local.server.port"));
  }

  @AfterAll
  static synchronized void stop() {
    if (cache != null) {
      cache.close();
      cache = null;
    }
    upstream.close();
  }

  @FuzzTest(maxDuration = "10m")
  void anyRequestIsAnsweredWithoutA5xx(FuzzedDataProvider data) throws IOException {
    // Jazzer's network sanitizer flags connections, and resets its policy when fuzzing starts:
    // only loopback ones are made (the client's, and the cache's to its upstream), and allowed.
    try (SilentCloseable loopback =
        BugDetectors.allowNetworkConnections(RegistryPortFuzzTest::isLoopback)) {
      start();
      request(data);
    }
  }

  private static boolean isLoopback(String host, int port) {
    return host.equals("localhost")
        || host.startsWith("127.")
        || host.equals("::1")
        || host.equals("0:0:0:0:0:0:0:1");
  }

  private static void request(FuzzedDataProvider data) {
    String method = data.pickValue(METHODS);
    String target = data.pickValue(PREFIXES) + headerSafe(data.consumeString(200));
    List<String> headers = new ArrayList<>();
    if (data.consumeBoolean()) {
      headers.add("Host: " + headerSafe(data.consumeString(80)));
    } else {
      headers.add("Host: localhost:" + port);
    }
    switch (data.consumeInt(0, 3)) {
      case 1 ->
          headers.add(
              "Authorization: Basic "
                  + Base64.getEncoder()
                      .encodeToString(data.consumeString(80).getBytes(StandardCharsets.UTF_8)));
      case 2 -> headers.add("Authorization: " + headerSafe(data.consumeString(120)));
      case 3 ->
          headers.add(
              "Authorization: Basic "
                  + Base64.getEncoder()
                      .encodeToString("alice:s3cret".getBytes(StandardCharsets.UTF_8)));
      default -> {}
    }
    byte[] body = data.consumeRemainingAsBytes();
    if (body.length > 0 && !method.equals("GET") && !method.equals("HEAD")) {
      headers.add("Content-Type: application/x-www-form-urlencoded");
      headers.add("Content-Length: " + body.length);
    }
    RawHttp.Response answer =
        RawHttp.send(port, method, target.isEmpty() ? "/" : target, headers, body);
    if (answer.status() == 0) {
      return; // Netty refused the request line itself and closed: no answer to judge
    }
    assertThat(answer.status()).as(method + " " + target + "\n" + answer).isLessThan(500);
    if (answer.status() >= 400
        && method.equals("GET")
        && answer.header("Content-Length") != null
        && answer.body().length > 0) {
      assertThat(answer.bodyText())
          .as(method + " " + target + "\n" + answer)
          .satisfiesAnyOf(
              b -> assertThat(b).startsWith("{\"errors\":["),
              b -> assertThat(b).contains("\"error\":"));
    }
  }

  /** What an HTTP/1.1 header line or request target can carry: no CR, LF or NUL. */
  private static String headerSafe(String value) {
    return value.replace('\r', ' ').replace('\n', ' ').replace('\0', ' ');
  }
}
