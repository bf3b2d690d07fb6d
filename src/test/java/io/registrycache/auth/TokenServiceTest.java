package io.registrycache.auth;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import com.nimbusds.jose.jwk.Curve;
import com.nimbusds.jose.jwk.gen.ECKeyGenerator;
import io.registrycache.config.RegistryCacheProperties;
import io.registrycache.testsupport.TestFiles;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.security.KeyPairGenerator;
import java.time.Clock;
import java.time.Duration;
import java.time.Instant;
import java.time.ZoneId;
import java.time.ZoneOffset;
import java.util.Base64;
import java.util.HashMap;
import java.util.Map;
import java.util.Set;
import org.junit.jupiter.api.Test;

class TokenServiceTest {

  static final Identity ALICE = new Identity(Identity.Kind.USER, "alice");
  static final Instant NOW = Instant.parse("2026-11-26T03:00:00Z");

  private static Map<String, String> settings(String... more) {
    Map<String, String> map =
        new HashMap<>(
            Map.of(
                "registry-cache.auth.enabled",
                "true",
                "registry-cache.auth.token.enabled",
                "true"));
    for (int i = 0; i < more.length; i += 2) {
      map.put(more[i], more[i + 1]);
    }
    return map;
  }

  private static TokenService service(Instant now, String... more) {
    return new TokenService(
        RegistryCacheProperties.bind(settings(more)), Clock.fixed(now, ZoneOffset.UTC));
  }

  @Test
  void aTokenCarriesItsSubjectKindAndGrantedRepositoriesOnly() {
    TokenService tokens = service(NOW);
    TokenService.Issued issued = tokens.issue(ALICE, Set.of("team/a", "upstream.test/team/b"));
    assertThat(issued.expiresIn()).isEqualTo(300);
    assertThat(issued.issuedAt()).isEqualTo(NOW);
    Identity identity = tokens.verify(issued.token()).orElseThrow();
    assertThat(identity.kind()).isEqualTo(Identity.Kind.USER);
    assertThat(identity.name()).isEqualTo("alice");
    assertThat(identity.pullable()).containsExactlyInAnyOrder("team/a", "upstream.test/team/b");
    String payload =
        new String(
            Base64.getUrlDecoder().decode(issued.token().split("\\.")[1]), StandardCharsets.UTF_8);
    assertThat(payload)
        .contains("\"access\"")
        .contains("\"actions\":[\"pull\"]")
        .contains("\"iss\":\"registry-cache\"");
    assertThat(issued.toString()).doesNotContain(issued.token());
  }

  @Test
  void expiredTamperedUnsignedAndForeignTokensAreRefused() {
    TokenService tokens = service(NOW);
    String token = tokens.issue(ALICE, Set.of("team/a")).token();
    assertThat(
            service(NOW.plus(Duration.ofMinutes(6)), "registry-cache.auth.token.ttl", "5m")
                .verify(token))
        .as("another key (each service made its own)")
        .isEmpty();
    assertThat(
            new TokenService(
                    RegistryCacheProperties.bind(settings()),
                    Clock.fixed(NOW.plus(Duration.ofMinutes(7)), ZoneOffset.UTC))
                .verify(token))
        .isEmpty();

    String[] parts = token.split("\\.");
    String forgedPayload =
        Base64.getUrlEncoder()
            .withoutPadding()
            .encodeToString(
                new String(Base64.getUrlDecoder().decode(parts[1]), StandardCharsets.UTF_8)
                    .replace("team/a", "team/b")
                    .getBytes(StandardCharsets.UTF_8));
    assertThat(tokens.verify(parts[0] + "." + forgedPayload + "." + parts[2]))
        .as("tampered")
        .isEmpty();

    String none =
        Base64.getUrlEncoder()
            .withoutPadding()
            .encodeToString("{\"alg\":\"none\"}".getBytes(StandardCharsets.UTF_8));
    assertThat(tokens.verify(none + "." + parts[1] + ".")).as("alg none").isEmpty();
    assertThat(tokens.verify(none + "." + parts[1])).as("alg none, two parts").isEmpty();
    String hs =
        Base64.getUrlEncoder()
            .withoutPadding()
            .encodeToString("{\"alg\":\"HS256\"}".getBytes(StandardCharsets.UTF_8));
    assertThat(tokens.verify(hs + "." + parts[1] + "." + parts[2])).as("alg HS256").isEmpty();
    assertThat(tokens.verify("not a token")).isEmpty();
    assertThat(tokens.verify("")).isEmpty();
  }

  @Test
  void expiryIsChecked() {
    TokenService signing = withClock(null, NOW);
    String token = signing.issue(ALICE, Set.of("team/a")).token();
    assertThat(signing.verify(token)).isPresent();
    // the same key, later: verify with a clock past expiry plus the 60 s skew
    TokenService later = withClock(signing, NOW.plus(Duration.ofMinutes(7)));
    assertThat(later.verify(token)).isEmpty();
    assertThat(withClock(signing, NOW.plus(Duration.ofMinutes(4))).verify(token)).isPresent();
  }

  @Test
  void aTokenVerifiedBeforeIsStillRefusedOnceExpiredOrBeforeItsStart() {
    Instant[] now = {NOW};
    Clock moving =
        new Clock() {
          @Override
          public Instant instant() {
            return now[0];
          }

          @Override
          public ZoneId getZone() {
            return ZoneOffset.UTC;
          }

          @Override
          public Clock withZone(ZoneId zone) {
            return this;
          }
        };
    TokenService tokens = new TokenService(RegistryCacheProperties.bind(settings()), moving);
    String token = tokens.issue(ALICE, Set.of("team/a")).token();
    assertThat(tokens.verify(token)).isPresent(); // remembered from here on
    now[0] = NOW.plus(Duration.ofMinutes(5)).plusSeconds(59);
    assertThat(tokens.verify(token)).as("within the 60 s skew after exp").isPresent();
    now[0] = NOW.plus(Duration.ofMinutes(6));
    assertThat(tokens.verify(token)).as("exp + skew").isEmpty();
    now[0] = NOW.minusSeconds(60);
    assertThat(tokens.verify(token)).as("nbf - skew").isEmpty();
    now[0] = NOW.minusSeconds(59);
    assertThat(tokens.verify(token)).isPresent();
  }

  /** The same key file, another clock. */
  private static TokenService withClock(TokenService ignored, Instant now) {
    return new TokenService(
        RegistryCacheProperties.bind(
            settings("registry-cache.auth.token.key-file", KEY.toString())),
        Clock.fixed(now, ZoneOffset.UTC));
  }

  static final Path KEY = rsaKeyFile();

  /** As {@code openssl genpkey -algorithm RSA} writes it: PKCS#8 PEM. */
  private static Path rsaKeyFile() {
    try {
      KeyPairGenerator generator = KeyPairGenerator.getInstance("RSA");
      generator.initialize(2048);
      byte[] pkcs8 = generator.generateKeyPair().getPrivate().getEncoded();
      String pem =
          "-----BEGIN PRIVATE KEY-----\n"
              + Base64.getMimeEncoder(64, "\n".getBytes()).encodeToString(pkcs8)
              + "\n-----END PRIVATE KEY-----\n";
      return Files.writeString(TestFiles.tempDirectory("token-key-").resolve("key.pem"), pem);
    } catch (Exception e) {
      throw new IllegalStateException(e);
    }
  }

  @Test
  void aPrivateJwkFileSignsEs256Tokens() throws Exception {
    Path jwk =
        Files.writeString(
            TestFiles.tempDirectory("token-key-").resolve("key.jwk"),
            new ECKeyGenerator(Curve.P_256).generate().toJSONString());
    TokenService one = service(NOW, "registry-cache.auth.token.key-file", jwk.toString());
    String token = one.issue(ALICE, Set.of("team/a")).token();
    assertThat(
            new String(
                Base64.getUrlDecoder().decode(token.split("\\.")[0]), StandardCharsets.UTF_8))
        .contains("ES256");
    assertThat(service(NOW, "registry-cache.auth.token.key-file", jwk.toString()).verify(token))
        .isPresent();
    assertThat(service(NOW, "registry-cache.auth.token.key-file", KEY.toString()).verify(token))
        .as("an RS256 service refuses an ES256 token")
        .isEmpty();
  }

  @Test
  void aKeyFileSignsTokensThatAnotherInstanceWithTheSameFileAccepts() {
    TokenService one = service(NOW, "registry-cache.auth.token.key-file", KEY.toString());
    TokenService two = service(NOW, "registry-cache.auth.token.key-file", KEY.toString());
    assertThat(two.verify(one.issue(ALICE, Set.of("team/a")).token())).isPresent();
  }

  @Test
  void aBadKeyFileStopsStartUp() throws Exception {
    Path bad =
        Files.writeString(TestFiles.tempDirectory("token-key-").resolve("bad.pem"), "not a key\n");
    assertThatThrownBy(() -> service(NOW, "registry-cache.auth.token.key-file", bad.toString()))
        .isInstanceOf(IllegalStateException.class)
        .hasMessageContaining("registry-cache.auth.token.key-file");
  }

  @Test
  void offUnlessAuthIsOnToo() {
    TokenService off =
        new TokenService(
            RegistryCacheProperties.bind(Map.of("registry-cache.auth.token.enabled", "true")));
    assertThat(off.enabled()).isFalse();
    assertThat(off.verify("x.y.z")).isEmpty();
  }
}
