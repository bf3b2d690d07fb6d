package io.registrycache.api;

import static org.assertj.core.api.Assertions.assertThat;

import io.registrycache.RegistryCacheApplication;
import io.registrycache.testsupport.CacheProperties;
import io.registrycache.testsupport.RawHttp;
import io.registrycache.testsupport.RawHttp.Response;
import io.registrycache.testsupport.ScriptedHttp;
import io.registrycache.testsupport.Sha256;
import io.registrycache.testsupport.TestFiles;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Base64;
import java.util.List;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;
import org.springframework.boot.test.context.SpringBootTest;
import org.springframework.boot.test.web.server.LocalServerPort;
import org.springframework.security.crypto.bcrypt.BCryptPasswordEncoder;
import org.springframework.test.context.DynamicPropertyRegistry;
import org.springframework.test.context.DynamicPropertySource;

/**
 * Request targets and {@code Host} values on the registry port, with the token flow on (so that
 * answers carry a Bearer challenge whose realm is built from the request): every form is answered
 * by the one target parser ({@link HttpTarget}) with a 4xx and an OCI error body, or served; none
 * is a 500.
 */
@SpringBootTest(
    classes = RegistryCacheApplication.class,
    webEnvironment = SpringBootTest.WebEnvironment.RANDOM_PORT)
class RequestTargetFormsTest {

  static final ScriptedHttp upstream = new ScriptedHttp();
  static final Path storage = TestFiles.tempDirectory("registry-cache-targets-");
  static final byte[] LAYER = "layer bytes".getBytes(StandardCharsets.UTF_8);
  static final String DIGEST = Sha256.digest(LAYER);
  static final String ALICE =
      "Authorization: Basic "
          + Base64.getEncoder().encodeToString("alice:s3cret".getBytes(StandardCharsets.UTF_8));

  @LocalServerPort int port;

  @DynamicPropertySource
  static void properties(DynamicPropertyRegistry registry) {
    try {
      Files.writeString(
          storage.resolve("htpasswd"),
          "alice:" + new BCryptPasswordEncoder(4).encode("s3cret") + "\n");
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
    CacheProperties.cache(storage.resolve("cache"))
        .localUpstream(upstream::baseUrl)
        .upstream("retry.max-attempts", "1")
        .upstream("circuit-breaker.enabled", "false")
        .addTo(registry);
    registry.add("registry-cache.auth.enabled", () -> "true");
    registry.add("registry-cache.auth.htpasswd-file", () -> storage.resolve("htpasswd").toString());
    registry.add("registry-cache.auth.token.enabled", () -> "true");
    registry.add("registry-cache.auth.rules[0].subjects", () -> "user:alice");
    registry.add("registry-cache.auth.rules[0].repositories", () -> "app");
    upstream.route(
        "/v2/app/blobs/" + DIGEST,
        ex -> ScriptedHttp.send(ex, 200, "application/octet-stream", LAYER, DIGEST));
  }

  @AfterAll
  static void stop() {
    upstream.close();
  }

  private static void assertOciError(Response answer, int status, String code) {
    assertThat(answer.status()).as(answer.toString()).isEqualTo(status);
    assertThat(answer.header("Content-Type")).as(answer.toString()).startsWith("application/json");
    assertThat(answer.bodyText()).as(answer.toString()).contains("\"code\":\"" + code + "\"");
  }

  @ParameterizedTest
  @ValueSource(strings = {"GET", "HEAD"})
  void anAbsoluteFormTargetIsServedAndItsAuthorityMakesTheRealm(String method) {
    Response challenged =
        RawHttp.send(
            port, method, "http://cache.example:9999/v2/app/blobs/" + DIGEST, "Host: localhost");
    assertThat(challenged.status()).as(challenged.toString()).isEqualTo(401);
    assertThat(challenged.header("WWW-Authenticate"))
        .startsWith("Bearer realm=\"http://cache.example:9999/v2/token\"");

    Response served =
        RawHttp.send(
            port,
            method,
            "http://localhost:" + port + "/v2/app/blobs/" + DIGEST,
            "Host: localhost",
            ALICE);
    assertThat(served.status()).as(served.toString()).isEqualTo(200);
    assertThat(served.header("Docker-Content-Digest")).isEqualTo(DIGEST);
    if (method.equals("GET")) {
      assertThat(served.bodyText()).isEqualTo("layer bytes");
    }
  }

  @Test
  void anAbsoluteFormBaseAndTagListGoToTheirRoutes() {
    Response base =
        RawHttp.send(port, "GET", "http://localhost:" + port + "/v2/", "Host: localhost");
    assertThat(base.status()).as(base.toString()).isEqualTo(401);
    assertThat(base.header("WWW-Authenticate"))
        .startsWith("Bearer realm=\"http://localhost:" + port + "/v2/token\"");
  }

  @ParameterizedTest
  @ValueSource(
      strings = {
        "/v2/app%2Fmanifests/latest",
        "/v2/app%2fblobs/" + "sha256:00",
        "/v2/app;p=1/manifests/latest",
        "/v2/app/../app/manifests/latest",
        "/v2//app/manifests/latest",
        "/v2/app%C3%A9/manifests/latest",
        "/v2/app%2Ftags/list",
        "/v2/app/referrers/..",
        "/%76%32/app/manifests/latest",
        "/v2;x/"
      })
  void targetsSpeltAnotherWayAre400NameInvalidForAnyoneOnAnyMethod(String target) {
    for (String method : List.of("GET", "POST", "DELETE")) {
      assertOciError(RawHttp.send(port, method, target, "Host: localhost"), 400, "NAME_INVALID");
      assertOciError(
          RawHttp.send(port, method, target, "Host: localhost", ALICE), 400, "NAME_INVALID");
    }
    Response head = RawHttp.send(port, "HEAD", target, "Host: localhost");
    assertThat(head.status()).isEqualTo(400);
    assertThat(head.body()).isEmpty();
  }

  @ParameterizedTest
  @ValueSource(strings = {"a\"b", "a b", "a{b}", "a|b", "a\\b", "a^b", "a<b>", "a`b", "a,b", ""})
  void aHostThatIsNotHostAndPortIs400OnEveryRoute(String host) {
    for (String target :
        List.of(
            "/v2/",
            "/v2/app/manifests/v1",
            "/v2/app/blobs/" + DIGEST,
            "/v2/app/tags/list",
            "/v2/app/referrers/" + DIGEST,
            "/v2/token?service=registry-cache")) {
      assertOciError(RawHttp.send(port, "GET", target, "Host: " + host), 400, "NAME_INVALID");
    }
  }

  @Test
  void withoutAHostAChallengeCannotBeBuiltAndThatIsA400() {
    Response answer = RawHttp.send(port, "GET", "/v2/app/manifests/v1");
    assertOciError(answer, 400, "NAME_INVALID");
    assertThat(answer.bodyText()).contains("Host header is required");
  }
}
