package io.registrycache.auth;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.registrycache.config.RegistryCacheProperties;
import io.registrycache.testsupport.TestFiles;
import java.net.URI;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.FileTime;
import java.time.Duration;
import java.time.Instant;
import java.util.Base64;
import java.util.Date;
import java.util.List;
import java.util.Map;
import java.util.Set;
import org.awaitility.Awaitility;
import org.junit.jupiter.api.Test;
import reactor.core.Fuseable.ScalarCallable;
import reactor.core.publisher.Mono;

class PullAuthenticationTest {

  private static String basic(String user, String password) {
    return "Basic "
        + Base64.getEncoder()
            .encodeToString((user + ":" + password).getBytes(StandardCharsets.UTF_8));
  }

  private static PullAuthentication authentication() throws Exception {
    Path dir = TestFiles.tempDirectory("pull-auth-");
    Path htpasswd = Files.writeString(dir.resolve("htpasswd"), HtpasswdTest.ALICE + "\n");
    Path tokens = Files.writeString(dir.resolve("tokens"), "ci:" + RobotTokensTest.TOKEN + "\n");
    return new PullAuthentication(
        RegistryCacheProperties.bind(
            Map.of(
                "registry-cache.auth.enabled",
                "true",
                "registry-cache.auth.realm",
                "corp cache",
                "registry-cache.auth.htpasswd-file",
                htpasswd.toString(),
                "registry-cache.auth.tokens-file",
                tokens.toString())));
  }

  private static Identity identity(PullAuthentication auth, String... headers) {
    return auth.authenticate(List.of(headers)).block();
  }

  private static void refused(PullAuthentication auth, String message, String... headers) {
    Mono<Identity> result = auth.authenticate(List.of(headers));
    assertThatThrownBy(result::block)
        .isInstanceOfSatisfying(
            AuthenticationRequired.class,
            e ->
                assertThat(e.challenge())
                    .isEqualTo("Basic realm=\"corp cache\", charset=\"UTF-8\""))
        .hasMessageContaining(message);
  }

  @Test
  void usersAndRobotsByBasicCredentials() throws Exception {
    PullAuthentication auth = authentication();
    assertThat(identity(auth)).isEqualTo(Identity.ANONYMOUS);
    assertThat(identity(auth, basic("", "")))
        .as("containers/image without credentials")
        .isEqualTo(Identity.ANONYMOUS);
    assertThat(identity(auth, basic("alice", "s3cret")))
        .isEqualTo(new Identity(Identity.Kind.USER, "alice"));
    assertThat(identity(auth, basic("alice", "s3cret")))
        .as("remembered")
        .isEqualTo(new Identity(Identity.Kind.USER, "alice"));
    assertThat(identity(auth, basic("ci", RobotTokensTest.TOKEN)))
        .isEqualTo(new Identity(Identity.Kind.ROBOT, "ci"));
  }

  @Test
  void wrongOrUnreadableCredentialsAre401WithTheChallenge() throws Exception {
    PullAuthentication auth = authentication();
    identity(auth, basic("alice", "s3cret"));
    refused(auth, "invalid user name or password", basic("alice", "S3cret"));
    refused(auth, "invalid user name or password", basic("mallory", "s3cret"));
    refused(auth, "invalid user name or password", basic("ci", RobotTokensTest.TOKEN + "0"));
    refused(auth, "invalid user name or password", basic("alice", "x".repeat(100)));
    refused(auth, "only Basic", "Bearer abc");
    refused(auth, "non-empty user", basic("", "s3cret"));
    refused(auth, "base64", "Basic %%%");
    refused(auth, "longer than", "Basic " + "A".repeat(9000));
    refused(auth, "more than one", basic("alice", "s3cret"), basic("alice", "s3cret"));
  }

  @Test
  void aUserRemovedFromTheFileIsRefusedWithinASecondThoughRemembered() throws Exception {
    Path dir = TestFiles.tempDirectory("pull-auth-");
    Path htpasswd = Files.writeString(dir.resolve("htpasswd"), HtpasswdTest.ALICE + "\n");
    PullAuthentication auth =
        new PullAuthentication(
            RegistryCacheProperties.bind(
                Map.of(
                    "registry-cache.auth.enabled",
                    "true",
                    "registry-cache.auth.realm",
                    "corp cache",
                    "registry-cache.auth.htpasswd-file",
                    htpasswd.toString())));
    assertThat(identity(auth, basic("alice", "s3cret")))
        .isEqualTo(new Identity(Identity.Kind.USER, "alice"));
    Files.writeString(htpasswd, "# nobody\n");
    Files.setLastModifiedTime(htpasswd, FileTime.from(Instant.now().plusSeconds(5)));
    Awaitility.await("alice refused after her removal")
        .atMost(Duration.ofSeconds(5))
        .pollInterval(Duration.ofMillis(200))
        .untilAsserted(
            () -> refused(auth, "invalid user name or password", basic("alice", "s3cret")));
  }

  @Test
  void aNonBcryptHtpasswdStopsStartUp() throws Exception {
    Path file =
        Files.writeString(
            TestFiles.tempDirectory("pull-auth-").resolve("htpasswd"),
            "bob:$apr1$7HhHvxKU$Js4bmVTHYGoMtyrLLrUJm0\n");
    assertThatThrownBy(
            () ->
                new PullAuthentication(
                    RegistryCacheProperties.bind(
                        Map.of(
                            "registry-cache.auth.enabled",
                            "true",
                            "registry-cache.auth.htpasswd-file",
                            file.toString()))))
        .isInstanceOf(IllegalStateException.class)
        .hasMessageContaining("registry-cache.auth.htpasswd-file")
        .hasMessageContaining("only bcrypt");
  }

  @Test
  void bearerTokensOfTrustedIssuersWithOrWithoutTheTokenFlow() throws Exception {
    Path jwks = ExternalTokensTest.jwksFile(ExternalTokensTest.RSA.toPublicJWK());
    URI uri = URI.create("http://cache.test/v2/team/app/manifests/1");
    String good =
        "Bearer "
            + ExternalTokensTest.token(
                ExternalTokensTest.RSA,
                c ->
                    c.issueTime(new Date())
                        .notBeforeTime(new Date())
                        .expirationTime(Date.from(Instant.now().plusSeconds(300))));
    for (String flow : List.of("false", "true")) {
      Map<String, String> settings =
          ExternalTokensTest.settings(
              "registry-cache.auth.trusted-issuers[0].jwks-file",
              jwks.toString(),
              "registry-cache.auth.token.enabled",
              flow);
      PullAuthentication auth = new PullAuthentication(RegistryCacheProperties.bind(settings));
      Mono<Identity> first = auth.authenticate(List.of(good), uri);
      assertThat(first)
          .as("first use: verified off the event loop")
          .isNotInstanceOf(ScalarCallable.class);
      assertThat(first.block())
          .as("token flow " + flow)
          .isEqualTo(
              Identity.external(ExternalTokensTest.ISSUER_KEY, "alice", Set.of("platform", "ci")));
      Mono<Identity> again = auth.authenticate(List.of(good), uri);
      assertThat(again)
          .as("a remembered verdict: an answer at hand, no parse, no thread hop")
          .isInstanceOf(ScalarCallable.class);
      assertThat(again.block()).isEqualTo(first.block());
      String expectedChallenge =
          flow.equals("true")
              ? "Bearer realm=\"http://cache.test/v2/token\",service=\"registry-cache\""
              : "Basic realm=\"registry-cache\", charset=\"UTF-8\"";
      String expired = "Bearer " + ExternalTokensTest.token(ExternalTokensTest.RSA);
      String untrusted =
          "Bearer "
              + ExternalTokensTest.token(
                  ExternalTokensTest.RSA,
                  c ->
                      c.issuer("https://evil.test")
                          .expirationTime(Date.from(Instant.now().plusSeconds(300))));
      for (String header : List.of(expired, untrusted, "Bearer not-a-token")) {
        assertThatThrownBy(() -> auth.authenticate(List.of(header), uri).block())
            .isInstanceOfSatisfying(
                AuthenticationRequired.class,
                e -> assertThat(e.challenge()).isEqualTo(expectedChallenge))
            .satisfies(e -> assertThat(e.getMessage()).doesNotContain(header.substring(7)));
      }
    }
  }

  @Test
  void offByDefaultAndFilesNotEvenRead() {
    PullAuthentication auth =
        new PullAuthentication(
            RegistryCacheProperties.bind(
                Map.of("registry-cache.auth.htpasswd-file", "/nonexistent/htpasswd")));
    assertThat(auth.enabled()).isFalse();
  }
}
