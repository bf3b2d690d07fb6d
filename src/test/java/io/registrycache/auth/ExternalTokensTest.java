package io.registrycache.auth;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import com.nimbusds.jose.JOSEObjectType;
import com.nimbusds.jose.JWSAlgorithm;
import com.nimbusds.jose.JWSHeader;
import com.nimbusds.jose.JWSSigner;
import com.nimbusds.jose.crypto.ECDSASigner;
import com.nimbusds.jose.crypto.MACSigner;
import com.nimbusds.jose.crypto.RSASSASigner;
import com.nimbusds.jose.jwk.Curve;
import com.nimbusds.jose.jwk.ECKey;
import com.nimbusds.jose.jwk.JWK;
import com.nimbusds.jose.jwk.JWKSet;
import com.nimbusds.jose.jwk.RSAKey;
import com.nimbusds.jose.jwk.gen.ECKeyGenerator;
import com.nimbusds.jose.jwk.gen.RSAKeyGenerator;
import com.nimbusds.jwt.JWTClaimsSet;
import com.nimbusds.jwt.PlainJWT;
import com.nimbusds.jwt.SignedJWT;
import io.registrycache.config.AuthProperties;
import io.registrycache.config.RegistryCacheProperties;
import io.registrycache.testsupport.TestFiles;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.FileTime;
import java.time.Clock;
import java.time.Duration;
import java.time.Instant;
import java.time.ZoneOffset;
import java.util.Base64;
import java.util.Date;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.atomic.AtomicLong;
import java.util.function.Consumer;
import org.junit.jupiter.api.Test;
import org.springframework.boot.context.properties.bind.Binder;
import org.springframework.boot.context.properties.source.ConfigurationPropertySources;
import org.springframework.core.env.StandardEnvironment;
import org.springframework.core.env.SystemEnvironmentPropertySource;

class ExternalTokensTest {

  static final String ISSUER = "https://idp.test";

  /** The issuer's key in rules by default: its host. */
  static final String ISSUER_KEY = "idp.test";

  static final String AUDIENCE = "registry-cache.test";
  static final Instant NOW = Instant.parse("2026-11-26T03:00:00Z");

  static final RSAKey RSA = generateRsa("rsa-1");
  static final ECKey EC = generateEc("ec-1");

  static RSAKey generateRsa(String kid) {
    try {
      return new RSAKeyGenerator(2048).keyID(kid).generate();
    } catch (Exception e) {
      throw new IllegalStateException(e);
    }
  }

  static ECKey generateEc(String kid) {
    try {
      return new ECKeyGenerator(Curve.P_256).keyID(kid).generate();
    } catch (Exception e) {
      throw new IllegalStateException(e);
    }
  }

  /** A token signed with {@code key} (RS256 or ES256 by its type), header {@code kid} the key's. */
  static String token(JWK key, Consumer<JWTClaimsSet.Builder> claims) {
    try {
      JWTClaimsSet.Builder builder =
          new JWTClaimsSet.Builder()
              .issuer(ISSUER)
              .audience(AUDIENCE)
              .subject("alice")
              .issueTime(Date.from(NOW))
              .notBeforeTime(Date.from(NOW))
              .expirationTime(Date.from(NOW.plus(Duration.ofMinutes(5))))
              .claim("groups", List.of("platform", "ci"));
      claims.accept(builder);
      JWSAlgorithm algorithm = key instanceof ECKey ? JWSAlgorithm.ES256 : JWSAlgorithm.RS256;
      JWSSigner signer =
          key instanceof ECKey ec ? new ECDSASigner(ec) : new RSASSASigner((RSAKey) key);
      SignedJWT jwt =
          new SignedJWT(
              new JWSHeader.Builder(algorithm)
                  .keyID(key.getKeyID())
                  .type(JOSEObjectType.JWT)
                  .build(),
              builder.build());
      jwt.sign(signer);
      return jwt.serialize();
    } catch (Exception e) {
      throw new IllegalStateException(e);
    }
  }

  static String token(JWK key) {
    return token(key, c -> {});
  }

  static Path jwksFile(JWK... keys) throws Exception {
    Path file = TestFiles.tempDirectory("jwks-").resolve("jwks.json");
    Files.writeString(file, new JWKSet(List.of(keys)).toString(true));
    return file;
  }

  static Map<String, String> settings(String... more) {
    Map<String, String> map =
        new HashMap<>(
            Map.of(
                "registry-cache.auth.enabled", "true",
                "registry-cache.auth.trusted-issuers[0].issuer", ISSUER,
                "registry-cache.auth.trusted-issuers[0].audience", AUDIENCE));
    for (int i = 0; i < more.length; i += 2) {
      map.put(more[i], more[i + 1]);
    }
    return map;
  }

  private final AtomicLong nanoTime = new AtomicLong();

  private ExternalTokens tokens(Instant now, Path jwks, String... more) {
    Map<String, String> map = settings(more);
    map.put("registry-cache.auth.trusted-issuers[0].jwks-file", jwks.toString());
    return new ExternalTokens(
        RegistryCacheProperties.bind(map), Clock.fixed(now, ZoneOffset.UTC), nanoTime::get);
  }

  @Test
  void aGoodTokenIsTheIssuersUserWithItsGroups() throws Exception {
    ExternalTokens tokens = tokens(NOW, jwksFile(RSA.toPublicJWK(), EC.toPublicJWK()));
    Identity rsa = tokens.verify(token(RSA)).orElseThrow();
    assertThat(rsa)
        .isEqualTo(
            new Identity(
                Identity.Kind.ISSUER, "alice", null, Set.of("platform", "ci"), ISSUER_KEY));
    assertThat(rsa.logName()).as("named with its issuer").isEqualTo("jwt:idp.test/alice");
    assertThat(rsa.metricLabel()).as("bounded by the issuers configured").isEqualTo("jwt:idp.test");
    assertThat(tokens.verify(token(EC, c -> c.subject("bob").claim("groups", "ops"))).orElseThrow())
        .as("ES256, groups as one string")
        .isEqualTo(Identity.external(ISSUER_KEY, "bob", Set.of("ops")));
    assertThat(tokens.verify(token(RSA, c -> c.claim("groups", null))).orElseThrow().groups())
        .isEmpty();
    assertThat(tokens.verify(token(RSA, c -> c.audience(List.of("other", AUDIENCE)))))
        .as("aud naming it among others")
        .isPresent();
    assertThat(tokens.verify(token(RSA, c -> c.expirationTime(Date.from(NOW.minusSeconds(30))))))
        .as("expired within the clock skew")
        .isPresent();
  }

  @Test
  void theIdentityAndGroupsClaimsAreConfigurable() throws Exception {
    ExternalTokens tokens =
        tokens(
            NOW,
            jwksFile(RSA.toPublicJWK()),
            "registry-cache.auth.trusted-issuers[0].identity-claim",
            "preferred_username",
            "registry-cache.auth.trusted-issuers[0].groups-claim",
            "roles");
    assertThat(
            tokens.verify(
                token(
                    RSA,
                    c -> c.claim("preferred_username", "carol").claim("roles", List.of("dev", 7)))))
        .hasValue(Identity.external(ISSUER_KEY, "carol", Set.of("dev")));
    assertThat(tokens.verify(token(RSA))).as("without the identity claim").isEmpty();
    assertThat(tokens.verify(token(RSA, c -> c.claim("preferred_username", 42))))
        .as("not a string")
        .isEmpty();
    assertThat(tokens.verify(token(RSA, c -> c.claim("preferred_username", "a\nb"))))
        .as("control character")
        .isEmpty();
  }

  @Test
  void wrongIssuerAudienceTimesKeysAndAlgorithmsAreRefused() throws Exception {
    ExternalTokens tokens = tokens(NOW, jwksFile(RSA.toPublicJWK(), EC.toPublicJWK()));
    assertThat(tokens.claimsTrustedIssuer(token(RSA))).isTrue();
    assertThat(tokens.verify(token(RSA, c -> c.issuer("https://other.test"))))
        .as("wrong iss")
        .isEmpty();
    assertThat(tokens.claimsTrustedIssuer(token(RSA, c -> c.issuer("https://other.test"))))
        .isFalse();
    assertThat(tokens.verify(token(RSA, c -> c.issuer(ISSUER + "/"))))
        .as("iss not exact")
        .isEmpty();
    assertThat(tokens.verify(token(RSA, c -> c.audience("other")))).as("wrong aud").isEmpty();
    assertThat(tokens.verify(token(RSA, c -> c.audience((String) null)))).as("no aud").isEmpty();
    assertThat(tokens.verify(token(RSA, c -> c.expirationTime(Date.from(NOW.minusSeconds(120))))))
        .as("expired")
        .isEmpty();
    assertThat(tokens.verify(token(RSA, c -> c.expirationTime(null)))).as("no exp").isEmpty();
    assertThat(tokens.verify(token(RSA, c -> c.notBeforeTime(Date.from(NOW.plusSeconds(120))))))
        .as("not yet valid")
        .isEmpty();
    assertThat(tokens.verify(token(generateRsa("rsa-unknown")))).as("unknown kid").isEmpty();
    assertThat(tokens.verify(token(generateRsa("rsa-1"))))
        .as("bad signature: another key under a known kid")
        .isEmpty();

    String good = token(RSA);
    String[] parts = good.split("\\.");
    String forged =
        Base64.getUrlEncoder()
            .withoutPadding()
            .encodeToString(
                new String(Base64.getUrlDecoder().decode(parts[1]))
                    .replace("alice", "admin")
                    .getBytes());
    assertThat(tokens.verify(parts[0] + "." + forged + "." + parts[2]))
        .as("tampered payload")
        .isEmpty();

    JWTClaimsSet claims = SignedJWT.parse(good).getJWTClaimsSet();
    assertThat(tokens.verify(new PlainJWT(claims).serialize())).as("alg none").isEmpty();
    SignedJWT hmac =
        new SignedJWT(new JWSHeader.Builder(JWSAlgorithm.HS256).keyID("rsa-1").build(), claims);
    hmac.sign(new MACSigner(new byte[32]));
    assertThat(tokens.verify(hmac.serialize())).as("HS256").isEmpty();
    SignedJWT ps =
        new SignedJWT(new JWSHeader.Builder(JWSAlgorithm.PS256).keyID("rsa-1").build(), claims);
    ps.sign(new RSASSASigner(RSA));
    assertThat(tokens.verify(ps.serialize()))
        .as("an algorithm not accepted, with the right key")
        .isEmpty();
    assertThat(tokens.verify("not a token")).isEmpty();
    assertThat(tokens.verify("")).isEmpty();

    assertThat(tokens(NOW.plus(Duration.ofMinutes(7)), jwksFile(RSA.toPublicJWK())).verify(good))
        .as("the same token later")
        .isEmpty();
  }

  @Test
  void aJwksFileIsReadAgainWhenItChanges() throws Exception {
    Path file = jwksFile(RSA.toPublicJWK());
    ExternalTokens tokens = tokens(NOW, file);
    RSAKey next = generateRsa("rsa-2");
    assertThat(tokens.verify(token(next))).isEmpty();

    Files.writeString(
        file, new JWKSet(List.of(RSA, next)).toString(false)); // private parts too: dropped
    Files.setLastModifiedTime(file, FileTime.from(Instant.now().plusSeconds(10)));
    nanoTime.addAndGet(WatchedFile.CHECK_INTERVAL.toNanos());
    assertThat(tokens.verify(token(next))).as("the new key").isPresent();
    assertThat(tokens.verify(token(RSA))).as("the old key, still listed").isPresent();
  }

  @Test
  void environmentVariablesSetATrustedIssuer() {
    Map<String, Object> env =
        Map.of(
            "REGISTRYCACHE_AUTH_TRUSTEDISSUERS_0_ISSUER", ISSUER,
            "REGISTRYCACHE_AUTH_TRUSTEDISSUERS_0_AUDIENCE", AUDIENCE,
            "REGISTRYCACHE_AUTH_TRUSTEDISSUERS_0_JWKSURL", "https://idp.test/jwks.json",
            "REGISTRYCACHE_AUTH_TRUSTEDISSUERS_0_IDENTITYCLAIM", "email",
            "REGISTRYCACHE_AUTH_TRUSTEDISSUERS_0_GROUPSCLAIM", "roles");
    AuthProperties auth =
        new Binder(
                ConfigurationPropertySources.from(
                    new SystemEnvironmentPropertySource(
                        StandardEnvironment.SYSTEM_ENVIRONMENT_PROPERTY_SOURCE_NAME, env)))
            .bindOrCreate("registry-cache.auth", AuthProperties.class);
    AuthProperties.TrustedIssuer trusted = auth.trustedIssuers().get(0);
    assertThat(trusted.issuer()).isEqualTo(ISSUER);
    assertThat(trusted.audience()).isEqualTo(AUDIENCE);
    assertThat(trusted.jwksUrl()).hasToString("https://idp.test/jwks.json");
    assertThat(trusted.identityClaim()).isEqualTo("email");
    assertThat(trusted.groupsClaim()).isEqualTo("roles");
  }

  @Test
  void offWithoutAuthentication() throws Exception {
    Map<String, String> map =
        settings(
            "registry-cache.auth.enabled",
            "false",
            "registry-cache.auth.trusted-issuers[0].jwks-file",
            jwksFile(RSA.toPublicJWK()).toString());
    ExternalTokens tokens = new ExternalTokens(RegistryCacheProperties.bind(map));
    assertThat(tokens.enabled()).isFalse();
    assertThat(tokens.verify(token(RSA))).isEmpty();
  }

  @Test
  void badSettingsAreStartUpErrors() throws Exception {
    String file = jwksFile(RSA.toPublicJWK()).toString();
    assertThatThrownBy(() -> RegistryCacheProperties.bind(settings()))
        .hasStackTraceContaining("exactly one of jwks-file and jwks-url");
    assertThatThrownBy(
            () ->
                RegistryCacheProperties.bind(
                    settings(
                        "registry-cache.auth.trusted-issuers[0].jwks-file",
                        file,
                        "registry-cache.auth.trusted-issuers[0].jwks-url",
                        "https://idp.test/jwks")))
        .hasStackTraceContaining("exactly one of jwks-file and jwks-url");
    assertThatThrownBy(
            () ->
                RegistryCacheProperties.bind(
                    settings(
                        "registry-cache.auth.trusted-issuers[0].jwks-url", "http://idp.test/jwks")))
        .hasStackTraceContaining("jwks-url must be an https URL");
    assertThatThrownBy(
            () ->
                RegistryCacheProperties.bind(
                    settings(
                        "registry-cache.auth.trusted-issuers[0].jwks-url", "ftp://127.0.0.1/jwks")))
        .hasStackTraceContaining("jwks-url must be an https URL");
    assertThatThrownBy(
            () ->
                RegistryCacheProperties.bind(
                    settings(
                        "registry-cache.auth.trusted-issuers[0].jwks-file",
                        file,
                        "registry-cache.auth.trusted-issuers[0].audience",
                        "")))
        .hasStackTraceContaining("audience is required");
    assertThatThrownBy(
            () ->
                RegistryCacheProperties.bind(
                    settings(
                        "registry-cache.auth.trusted-issuers[0].jwks-file", file,
                        "registry-cache.auth.token.enabled", "true",
                        "registry-cache.auth.trusted-issuers[0].issuer", "registry-cache")))
        .hasStackTraceContaining("is the cache's own token service");
    Path broken = TestFiles.tempDirectory("jwks-").resolve("broken.json");
    Files.writeString(broken, "{\"keys\": []}");
    assertThatThrownBy(() -> tokens(NOW, broken))
        .isInstanceOf(IllegalStateException.class)
        .hasMessageContaining("jwks-file")
        .hasMessageContaining("no key");

    AuthProperties.TrustedIssuer loopback =
        RegistryCacheProperties.bind(
                settings(
                    "registry-cache.auth.trusted-issuers[0].jwks-url", "http://127.0.0.1:1/jwks"))
            .auth()
            .trustedIssuers()
            .get(0);
    assertThat(loopback.identityClaim()).isEqualTo("sub");
    assertThat(loopback.groupsClaim()).isEqualTo("groups");
    assertThat(loopback.jwksTimeout()).isEqualTo(Duration.ofSeconds(5));
    assertThat(loopback.jwksCacheTtl()).isEqualTo(Duration.ofMinutes(5));
  }
}
