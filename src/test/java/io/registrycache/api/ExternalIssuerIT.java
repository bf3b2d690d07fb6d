package io.registrycache.api;

import static io.registrycache.testsupport.CacheClient.describe;
import static io.registrycache.testsupport.CacheClient.errorCode;
import static org.assertj.core.api.Assertions.assertThat;

import com.nimbusds.jose.JWSAlgorithm;
import com.nimbusds.jose.JWSHeader;
import com.nimbusds.jose.crypto.ECDSASigner;
import com.nimbusds.jose.jwk.Curve;
import com.nimbusds.jose.jwk.ECKey;
import com.nimbusds.jose.jwk.JWKSet;
import com.nimbusds.jose.jwk.gen.ECKeyGenerator;
import com.nimbusds.jwt.JWTClaimsSet;
import com.nimbusds.jwt.SignedJWT;
import io.registrycache.it.AbstractCacheIT;
import io.registrycache.testsupport.CacheClient;
import io.registrycache.testsupport.Command;
import io.registrycache.testsupport.ScriptedHttp;
import io.registrycache.testsupport.Sha256;
import io.registrycache.testsupport.TestImages;
import io.registrycache.testsupport.TestImages.Blob;
import io.registrycache.testsupport.TestImages.Image;
import java.io.IOException;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.time.Duration;
import java.time.Instant;
import java.util.Date;
import java.util.List;
import java.util.Map;
import java.util.function.Consumer;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.springframework.test.context.DynamicPropertyRegistry;
import org.springframework.test.context.DynamicPropertySource;

/**
 * Issue 23 point 1, bearer JWTs of an external issuer the operator trusts ({@code
 * registry-cache.auth.trusted-issuers}): the issuer's JWK set is served over HTTP on loopback by a
 * server this test starts; the cache, with its own token flow on as well (so that clients see a
 * {@code Bearer} challenge), accepts the issuer's tokens on {@code /v2} requests and applies the
 * same rules to their subject and groups. Tokens of another issuer, another audience, another key
 * or expired are 401 and never reach the upstream.
 */
class ExternalIssuerIT extends AbstractCacheIT {

  static final String ISSUER = "https://idp.it.test";
  static final String AUDIENCE = "registry-cache-it";
  static final String PASSTHROUGH_HOST = "open.test";
  static final ECKey KEY = ecKey("idp-key-1");
  static final ScriptedHttp JWKS = jwksServer();

  static ECKey ecKey(String kid) {
    try {
      return new ECKeyGenerator(Curve.P_256).keyID(kid).generate();
    } catch (Exception e) {
      throw new IllegalStateException(e);
    }
  }

  static ScriptedHttp jwksServer() {
    ScriptedHttp server = new ScriptedHttp();
    byte[] body = new JWKSet(KEY.toPublicJWK()).toString(true).getBytes(StandardCharsets.UTF_8);
    server.route(
        "/jwks.json",
        exchange ->
            ScriptedHttp.respond(exchange, 200, Map.of("Content-Type", "application/json"), body));
    return server;
  }

  @AfterAll
  static void stopJwks() {
    JWKS.close();
  }

  @TempDir Path work;

  @DynamicPropertySource
  static void auth(DynamicPropertyRegistry registry) {
    registry.add("registry-cache.auth.enabled", () -> "true");
    registry.add("registry-cache.auth.token.enabled", () -> "true");
    registry.add("registry-cache.auth.trusted-issuers[0].key", () -> "idp");
    registry.add("registry-cache.auth.trusted-issuers[0].issuer", () -> ISSUER);
    registry.add("registry-cache.auth.trusted-issuers[0].audience", () -> AUDIENCE);
    registry.add(
        "registry-cache.auth.trusted-issuers[0].jwks-url", () -> JWKS.baseUrl() + "/jwks.json");
    registry.add("registry-cache.auth.rules[0].subjects", () -> "jwt:idp/alice");
    registry.add("registry-cache.auth.rules[0].repositories", () -> "it/allowed-*");
    registry.add("registry-cache.auth.rules[1].subjects", () -> "group:jwt:idp/builders");
    registry.add("registry-cache.auth.rules[1].repositories", () -> "it/team-*");
    // An htpasswd user's name: never the issuer's subject of the same name.
    registry.add("registry-cache.auth.rules[2].subjects", () -> "user:carol");
    registry.add("registry-cache.auth.rules[2].repositories", () -> "it/allowed-*");
    // The same registry:2 again, as an upstream that takes each client's own credentials.
    registry.add("registry-cache.upstreams.open.host", () -> PASSTHROUGH_HOST);
    registry.add("registry-cache.upstreams.open.url", upstream::baseUrl);
    registry.add("registry-cache.upstreams.open.credentials", () -> "passthrough");
  }

  /**
   * A token of the trusted issuer for {@code subject}, valid for five minutes, changed by {@code
   * more}.
   */
  static String token(ECKey key, String subject, Consumer<JWTClaimsSet.Builder> more) {
    Instant now = Instant.now();
    JWTClaimsSet.Builder claims =
        new JWTClaimsSet.Builder()
            .issuer(ISSUER)
            .audience(AUDIENCE)
            .subject(subject)
            .issueTime(Date.from(now))
            .expirationTime(Date.from(now.plus(Duration.ofMinutes(5))));
    more.accept(claims);
    try {
      SignedJWT jwt =
          new SignedJWT(
              new JWSHeader.Builder(JWSAlgorithm.ES256).keyID(key.getKeyID()).build(),
              claims.build());
      jwt.sign(new ECDSASigner(key));
      return jwt.serialize();
    } catch (Exception e) {
      throw new IllegalStateException(e);
    }
  }

  private HttpResponse<byte[]> get(String path, String token) {
    return cache.get(
        path, "Accept", CacheClient.MANIFEST_ACCEPT, "Authorization", "Bearer " + token);
  }

  private void pullAndVerify(Image image, String token) {
    pullAndVerify("/v2/" + image.repository(), image, token);
  }

  private void pullAndVerify(String base, Image image, String token) {
    HttpResponse<byte[]> manifest = get(base + "/manifests/" + image.tag(), token);
    assertThat(manifest.statusCode()).as(describe(manifest)).isEqualTo(200);
    assertThat(Sha256.digest(manifest.body())).isEqualTo(image.manifest().digest());
    for (Blob blob : image.blobs()) {
      HttpResponse<byte[]> response = get(base + "/blobs/" + blob.digest(), token);
      assertThat(response.statusCode()).as(describe(response)).isEqualTo(200);
      assertThat(Sha256.digest(response.body())).isEqualTo(blob.digest());
    }
  }

  private static long upstreamRequests(String repository) {
    upstream.syncLogs();
    return upstream.countRequestsUnder("/v2/" + repository + "/");
  }

  @Test
  void skopeoPullsWithTheIssuersTokenAndNotWithAnUntrustedOne() throws IOException {
    Command.requireTool(
        Command.onPath("skopeo"), "skopeo is not installed (apt-get install skopeo)");
    Image image =
        upstream.pusher().push(TestImages.smallOci(TestImages.uniqueRepository("allowed"), "v1"));
    String source = "docker://localhost:" + port + "/" + image.repository() + ":v1";
    long afterPush = upstreamRequests(image.repository());

    String untrusted =
        token(ecKey("idp-key-1"), "alice", c -> c.issuer("https://elsewhere.it.test"));
    Command.Result refused =
        Command.run(
            Duration.ofSeconds(150),
            List.of(
                "skopeo",
                "--insecure-policy",
                "--command-timeout",
                "120s",
                "copy",
                "--src-tls-verify=false",
                "--src-registry-token",
                untrusted,
                source,
                "oci:" + work.resolve("refused") + ":v1"));
    assertThat(refused.exitCode()).as(refused.output()).isNotZero();
    assertThat(upstreamRequests(image.repository()))
        .as("the untrusted token reached nothing upstream")
        .isEqualTo(afterPush);

    Path layout = work.resolve("layout");
    Command.run(
            Duration.ofSeconds(150),
            List.of(
                "skopeo",
                "--insecure-policy",
                "--command-timeout",
                "120s",
                "copy",
                "--src-tls-verify=false",
                "--src-registry-token",
                token(KEY, "alice", c -> {}),
                source,
                "oci:" + layout + ":v1"))
        .assertSuccess();
    for (Blob blob : image.blobs()) {
      assertThat(Sha256.digest(layout.resolve("blobs/sha256/" + blob.digest().substring(7))))
          .isEqualTo(blob.digest());
    }
    assertThat(
            Sha256.digest(layout.resolve("blobs/sha256/" + image.manifest().digest().substring(7))))
        .isEqualTo(image.manifest().digest());
  }

  @Test
  void theTokensSubjectAndGroupsFollowTheRules() {
    Image allowed =
        upstream.pusher().push(TestImages.smallOci(TestImages.uniqueRepository("allowed"), "v1"));
    Image team =
        upstream.pusher().push(TestImages.smallOci(TestImages.uniqueRepository("team"), "v1"));
    pullAndVerify(allowed, token(KEY, "alice", c -> {}));
    pullAndVerify(team, token(KEY, "dave", c -> c.claim("groups", List.of("builders"))));

    HttpResponse<byte[]> denied =
        get(
            "/v2/" + allowed.repository() + "/manifests/v1",
            token(KEY, "dave", c -> c.claim("groups", List.of("builders"))));
    assertThat(denied.statusCode()).as(describe(denied)).isEqualTo(403);
    assertThat(errorCode(denied)).isEqualTo("DENIED");
    HttpResponse<byte[]> noGroup =
        get("/v2/" + team.repository() + "/manifests/v1", token(KEY, "alice", c -> {}));
    assertThat(noGroup.statusCode()).as(describe(noGroup)).isEqualTo(403);
    HttpResponse<byte[]> userName =
        get("/v2/" + allowed.repository() + "/manifests/v1", token(KEY, "carol", c -> {}));
    assertThat(userName.statusCode())
        .as("user:carol does not name jwt:idp/carol: " + describe(userName))
        .isEqualTo(403);
  }

  /**
   * A pass-through upstream is asked with the client's own credentials: a trusted issuer's token
   * carries none for it, so the upstream (here an open {@code registry:2}) is asked anonymously.
   */
  @Test
  void aPassthroughUpstreamIsAskedAnonymouslyForAnIssuersUser() {
    Image image =
        upstream.pusher().push(TestImages.smallOci(TestImages.uniqueRepository("allowed"), "v1"));
    pullAndVerify(
        "/v2/" + PASSTHROUGH_HOST + "/" + image.repository(), image, token(KEY, "alice", c -> {}));
    HttpResponse<byte[]> other =
        get(
            "/v2/" + PASSTHROUGH_HOST + "/" + image.repository() + "/manifests/v1",
            token(KEY, "erin", c -> {}));
    assertThat(other.statusCode())
        .as("the rules still apply there: " + describe(other))
        .isEqualTo(403);
  }

  @Test
  void invalidTokensAre401WithTheChallengeAndNeverReachTheUpstream() {
    Image image =
        upstream.pusher().push(TestImages.smallOci(TestImages.uniqueRepository("allowed"), "v1"));
    long afterPush = upstreamRequests(image.repository());
    String manifest = "/v2/" + image.repository() + "/manifests/v1";
    List<String> invalid =
        List.of(
            token(KEY, "alice", c -> c.issuer("https://elsewhere.it.test")),
            token(KEY, "alice", c -> c.audience("another-service")),
            token(
                KEY,
                "alice",
                c -> c.expirationTime(Date.from(Instant.now().minus(Duration.ofMinutes(10))))),
            token(ecKey("idp-key-1"), "alice", c -> {}),
            token(ecKey("idp-key-unknown"), "alice", c -> {}),
            "not.a.token");
    for (String token : invalid) {
      HttpResponse<byte[]> response = get(manifest, token);
      assertThat(response.statusCode()).as(describe(response)).isEqualTo(401);
      assertThat(errorCode(response)).isEqualTo("UNAUTHORIZED");
      assertThat(response.headers().firstValue("WWW-Authenticate"))
          .as("the challenge of a failed authentication, as for a bad token of the cache's own")
          .hasValue(
              "Bearer realm=\"http://localhost:" + port + "/v2/token\",service=\"registry-cache\"");
      assertThat(new String(response.body(), StandardCharsets.UTF_8)).doesNotContain(token);
    }
    assertThat(upstreamRequests(image.repository())).isEqualTo(afterPush);
  }
}
