package io.registrycache.auth;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.registrycache.config.RegistryCacheProperties;
import io.registrycache.oci.OciErrorCode;
import io.registrycache.oci.OciException;
import io.registrycache.oci.RepositoryName;
import io.registrycache.testsupport.TestFiles;
import io.registrycache.testsupport.TestUpstreams;
import io.registrycache.upstream.Upstream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Clock;
import java.time.Duration;
import java.time.Instant;
import java.time.ZoneOffset;
import java.util.Base64;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Set;
import org.junit.jupiter.api.Test;
import reactor.core.publisher.Mono;

/**
 * The cache's own authentication with an upstream that takes each client's own credentials ({@code
 * registry-cache.upstreams.<key>.credentials: passthrough}): credentials the cache does not know
 * become a pass-through identity that may pull from such upstreams only; the credentials to pass on
 * come from Basic or from what the token endpoint was given; a cache without pass-through upstreams
 * is unchanged.
 */
class PassthroughCredentialsTest {

  static final Upstream PUBLIC = TestUpstreams.upstream("public", "http://public.invalid", s -> {});
  static final Upstream PRIVATE =
      TestUpstreams.upstream(
          "private", "http://private.invalid", s -> s.put("credentials", "passthrough"));

  private static String basic(String user, String password) {
    return "Basic "
        + Base64.getEncoder()
            .encodeToString((user + ":" + password).getBytes(StandardCharsets.UTF_8));
  }

  private static Map<String, String> settings(boolean passthrough, String... more)
      throws Exception {
    Path dir = TestFiles.tempDirectory("passthrough-auth-");
    Path htpasswd = Files.writeString(dir.resolve("htpasswd"), HtpasswdTest.ALICE + "\n");
    Map<String, String> map =
        new HashMap<>(
            Map.of(
                "registry-cache.auth.enabled", "true",
                "registry-cache.auth.htpasswd-file", htpasswd.toString(),
                "registry-cache.auth.rules[0].subjects", "authenticated",
                "registry-cache.auth.rules[0].repositories", "**",
                "registry-cache.upstreams.public.url", "http://public.invalid",
                "registry-cache.upstreams.private.url", "http://private.invalid"));
    if (passthrough) {
      map.put("registry-cache.upstreams.private.credentials", "passthrough");
    }
    for (int i = 0; i < more.length; i += 2) {
      map.put(more[i], more[i + 1]);
    }
    return map;
  }

  @Test
  void unknownCredentialsAreRefusedWithoutPassthroughUpstreams() throws Exception {
    PullAuthentication auth = new PullAuthentication(RegistryCacheProperties.bind(settings(false)));
    assertThat(auth.passthrough()).isFalse();
    assertThatThrownBy(() -> auth.authenticate(List.of(basic("dana", "upstream-pw"))).block())
        .isInstanceOf(AuthenticationRequired.class);
    assertThatThrownBy(() -> auth.authenticate(List.of(basic("alice", "wrong"))).block())
        .isInstanceOf(AuthenticationRequired.class);
  }

  @Test
  void unknownCredentialsMayPullFromPassthroughUpstreamsOnly() throws Exception {
    RegistryCacheProperties properties = RegistryCacheProperties.bind(settings(true));
    PullAuthentication auth = new PullAuthentication(properties);
    PullAccess access = new PullAccess(properties, auth, null);
    assertThat(auth.passthrough()).isTrue();
    Identity dana = auth.authenticate(List.of(basic("dana", "upstream-pw"))).block();
    assertThat(dana).isEqualTo(new Identity(Identity.Kind.PASSTHROUGH, "dana"));
    assertThat(auth.authenticate(List.of(basic("alice", "s3cret"))).block())
        .as("the cache's own users stay users")
        .isEqualTo(new Identity(Identity.Kind.USER, "alice"));

    RepositoryName app = RepositoryName.parse("team/app");
    assertThat(access.grants(dana, PRIVATE, app)).as("the upstream decides").isTrue();
    assertThat(access.grants(dana, PUBLIC, app))
        .as(
            "'authenticated' names the cache's users, robots and issuer subjects, not pass-through identities")
        .isFalse();
    assertThatThrownBy(
            () ->
                access
                    .decide(
                        dana,
                        "team/app",
                        PUBLIC,
                        app,
                        () -> null,
                        List.of(),
                        null,
                        u -> Mono.just(u))
                    .block())
        .as("an upstream with the cache's credentials: not the cache's credentials")
        .isInstanceOfSatisfying(
            AuthenticationRequired.class, e -> assertThat(e.getMessage()).contains("invalid"));
  }

  @Test
  void theCredentialsPassedOnComeFromBasicOrNone() throws Exception {
    PullAuthentication auth = new PullAuthentication(RegistryCacheProperties.bind(settings(true)));
    assertThat(auth.passthroughCredentials(List.of())).isEmpty();
    assertThat(auth.passthroughCredentials(List.of(basic("", "")))).isEmpty();
    assertThat(auth.passthroughCredentials(List.of(basic("dana", "pw:with:colons"))))
        .contains(new BasicCredentials("dana", "pw:with:colons"));
    for (List<String> bad :
        List.of(
            List.of("Basic !!!"),
            List.of(basic("a", "b"), basic("c", "d")),
            List.of("Bearer not-a-token"))) {
      assertThatThrownBy(() -> auth.passthroughCredentials(bad))
          .as("%s", bad)
          .isInstanceOf(AuthenticationRequired.class);
    }
  }

  @Test
  void theTokenEndpointsCredentialsArePassedOnWhileTheTokenIsValid() throws Exception {
    Instant now = Instant.parse("2026-11-26T06:00:00Z");
    Map<String, String> settings = settings(true, "registry-cache.auth.token.enabled", "true");
    TokenService tokens =
        new TokenService(RegistryCacheProperties.bind(settings), Clock.fixed(now, ZoneOffset.UTC));
    PullAuthentication auth =
        new PullAuthentication(RegistryCacheProperties.bind(settings), tokens);
    Identity dana = new Identity(Identity.Kind.PASSTHROUGH, "dana");
    String withCredentials =
        tokens
            .issue(
                dana,
                Set.of("private.invalid/team/app"),
                new BasicCredentials("dana", "upstream-pw"))
            .token();
    String without = tokens.issue(Identity.ANONYMOUS, Set.of(), null).token();

    assertThat(tokens.verify(withCredentials))
        .map(Identity::kind)
        .contains(Identity.Kind.PASSTHROUGH);
    assertThat(
            new String(
                Base64.getUrlDecoder().decode(withCredentials.split("\\.")[1]),
                StandardCharsets.UTF_8))
        .as("the password is never in the token")
        .doesNotContain("upstream-pw");
    assertThat(auth.passthroughCredentials(List.of("Bearer " + withCredentials)))
        .contains(new BasicCredentials("dana", "upstream-pw"));
    assertThat(auth.passthroughCredentials(List.of("Bearer " + without))).isEmpty();
    assertThat(
            tokens.passedCredentials(
                withCredentials.substring(0, withCredentials.length() - 2) + "xx"))
        .as("a tampered token")
        .isEmpty();

    TokenService later =
        new TokenService(
            RegistryCacheProperties.bind(settings),
            Clock.fixed(now.plus(Duration.ofMinutes(10)), ZoneOffset.UTC));
    assertThat(later.passedCredentials(withCredentials))
        .as("another service, another key")
        .isEmpty();
  }

  @Test
  void withoutPassthroughUpstreamsTheTokenEndpointKeepsNoCredentials() throws Exception {
    Map<String, String> settings = settings(false, "registry-cache.auth.token.enabled", "true");
    TokenService tokens = new TokenService(RegistryCacheProperties.bind(settings));
    String token =
        tokens
            .issue(
                new Identity(Identity.Kind.USER, "alice"),
                Set.of("team/app"),
                new BasicCredentials("alice", "s3cret"))
            .token();
    assertThat(tokens.passedCredentials(token)).contains(Optional.empty());
  }

  @Test
  void passthroughIsRefusedWithTheCachesOwnUpstreamCredentials() {
    assertThatThrownBy(
            () ->
                RegistryCacheProperties.bind(
                    Map.of(
                        "registry-cache.upstreams.private.url", "http://private.invalid",
                        "registry-cache.upstreams.private.credentials", "passthrough",
                        "registry-cache.upstreams.private.username", "robot",
                        "registry-cache.upstreams.private.password", "x")))
        .hasStackTraceContaining("credentials=passthrough");
    assertThat(
            RegistryCacheProperties.bind(
                    Map.of("registry-cache.upstreams.private.url", "http://private.invalid"))
                .upstreams()
                .upstreams()
                .get("private")
                .passthrough())
        .as("off by default")
        .isFalse();
  }

  @Test
  void unknownCredentialsCountAsAFailedCheckOfTheCacheOnceThenAreRemembered() throws Exception {
    PullAuthentication auth =
        new PullAuthentication(
            RegistryCacheProperties.bind(
                settings(
                    true,
                    "registry-cache.rate-limit.enabled",
                    "true",
                    "registry-cache.rate-limit.failed-checks.per-minute",
                    "1",
                    "registry-cache.rate-limit.failed-checks.burst",
                    "2")));
    String client = "192.0.2.7";
    assertThat(auth.authenticate(List.of(basic("dana", "pw-1")), null, client).block())
        .isEqualTo(new Identity(Identity.Kind.PASSTHROUGH, "dana"));
    assertThat(auth.authenticate(List.of(basic("dana", "pw-1")), null, client).block())
        .as("remembered: no token taken")
        .isEqualTo(new Identity(Identity.Kind.PASSTHROUGH, "dana"));
    assertThat(auth.authenticate(List.of(basic("alice", "a-guess")), null, client).block())
        .as(
            "a wrong password of a cache user: a pass-through identity, and the address's second failed check")
        .isEqualTo(new Identity(Identity.Kind.PASSTHROUGH, "alice"));
    assertThatThrownBy(
            () -> auth.authenticate(List.of(basic("alice", "another-guess")), null, client).block())
        .as("guessing goes no further than without pass-through")
        .isInstanceOfSatisfying(
            OciException.class, e -> assertThat(e.code()).isEqualTo(OciErrorCode.TOOMANYREQUESTS));
    assertThat(auth.authenticate(List.of(basic("alice", "s3cret")), null, "192.0.2.8").block())
        .isEqualTo(new Identity(Identity.Kind.USER, "alice"));
  }

  @Test
  void aPassthroughIdentityHasABoundedMetricLabel() {
    assertThat(new Identity(Identity.Kind.PASSTHROUGH, "whatever-a-client-typed").metricLabel())
        .isEqualTo("passthrough");
    assertThat(new Identity(Identity.Kind.PASSTHROUGH, "dana").logName())
        .isEqualTo("passthrough:dana");
  }

  @Test
  void aDeniedPassthroughIdentityIsNeverA403() throws Exception {
    RegistryCacheProperties properties = RegistryCacheProperties.bind(settings(true));
    PullAccess access = new PullAccess(properties, new PullAuthentication(properties), null);
    assertThatThrownBy(
            () ->
                access
                    .decide(
                        new Identity(Identity.Kind.PASSTHROUGH, "dana"),
                        "x",
                        PUBLIC,
                        RepositoryName.parse("x"),
                        () -> null,
                        List.of(),
                        null,
                        u -> Mono.just(u))
                    .block())
        .isInstanceOfSatisfying(
            OciException.class, e -> assertThat(e.code()).isEqualTo(OciErrorCode.UNAUTHORIZED));
  }
}
