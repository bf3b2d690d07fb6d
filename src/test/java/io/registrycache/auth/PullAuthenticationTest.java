package io.registrycache.auth;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.registrycache.config.RegistryCacheProperties;
import io.registrycache.testsupport.TestFiles;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Base64;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;
import reactor.core.publisher.Mono;

class PullAuthenticationTest {

  private static String basic(String user, String password) {
    return "Basic " + Base64.getEncoder().encodeToString((user + ":" + password).getBytes(StandardCharsets.UTF_8));
  }

  private static PullAuthentication authentication() throws Exception {
    Path dir = TestFiles.tempDirectory("pull-auth-");
    Path htpasswd = Files.writeString(dir.resolve("htpasswd"), HtpasswdTest.ALICE + "\n");
    Path tokens = Files.writeString(dir.resolve("tokens"), "ci:" + RobotTokensTest.TOKEN + "\n");
    return new PullAuthentication(RegistryCacheProperties.bind(Map.of(
        "registry-cache.auth.enabled", "true",
        "registry-cache.auth.realm", "corp cache",
        "registry-cache.auth.htpasswd-file", htpasswd.toString(),
        "registry-cache.auth.tokens-file", tokens.toString())));
  }

  private static Identity identity(PullAuthentication auth, String... headers) {
    return auth.authenticate(List.of(headers)).block();
  }

  private static void refused(PullAuthentication auth, String message, String... headers) {
    Mono<Identity> result = auth.authenticate(List.of(headers));
    assertThatThrownBy(result::block)
        .isInstanceOfSatisfying(AuthenticationRequired.class,
            e -> assertThat(e.challenge()).isEqualTo("Basic realm=\"corp cache\", charset=\"UTF-8\""))
        .hasMessageContaining(message);
  }

  @Test
  void usersAndRobotsByBasicCredentials() throws Exception {
    PullAuthentication auth = authentication();
    assertThat(identity(auth)).isEqualTo(Identity.ANONYMOUS);
    assertThat(identity(auth, basic("", ""))).as("containers/image without credentials").isEqualTo(Identity.ANONYMOUS);
    assertThat(identity(auth, basic("alice", "s3cret"))).isEqualTo(new Identity(Identity.Kind.USER, "alice"));
    assertThat(identity(auth, basic("alice", "s3cret"))).as("remembered").isEqualTo(new Identity(Identity.Kind.USER, "alice"));
    assertThat(identity(auth, basic("ci", RobotTokensTest.TOKEN))).isEqualTo(new Identity(Identity.Kind.ROBOT, "ci"));
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
    PullAuthentication auth = new PullAuthentication(RegistryCacheProperties.bind(Map.of(
        "registry-cache.auth.enabled", "true", "registry-cache.auth.realm", "corp cache",
        "registry-cache.auth.htpasswd-file", htpasswd.toString())));
    assertThat(identity(auth, basic("alice", "s3cret"))).isEqualTo(new Identity(Identity.Kind.USER, "alice"));
    Files.writeString(htpasswd, "# nobody\n");
    Files.setLastModifiedTime(htpasswd, java.nio.file.attribute.FileTime.from(java.time.Instant.now().plusSeconds(5)));
    org.awaitility.Awaitility.await("alice refused after her removal")
        .atMost(java.time.Duration.ofSeconds(5))
        .pollInterval(java.time.Duration.ofMillis(200))
        .untilAsserted(() -> refused(auth, "invalid user name or password", basic("alice", "s3cret")));
  }

  @Test
  void aNonBcryptHtpasswdStopsStartUp() throws Exception {
    Path file = Files.writeString(TestFiles.tempDirectory("pull-auth-").resolve("htpasswd"),
        "bob:$apr1$7HhHvxKU$Js4bmVTHYGoMtyrLLrUJm0\n");
    assertThatThrownBy(() -> new PullAuthentication(RegistryCacheProperties.bind(Map.of(
        "registry-cache.auth.enabled", "true", "registry-cache.auth.htpasswd-file", file.toString()))))
        .isInstanceOf(IllegalStateException.class)
        .hasMessageContaining("registry-cache.auth.htpasswd-file").hasMessageContaining("only bcrypt");
  }

  @Test
  void offByDefaultAndFilesNotEvenRead() {
    PullAuthentication auth = new PullAuthentication(RegistryCacheProperties.bind(Map.of(
        "registry-cache.auth.htpasswd-file", "/nonexistent/htpasswd")));
    assertThat(auth.enabled()).isFalse();
  }
}
