package io.registrycache.auth;

import static io.registrycache.auth.ExternalTokensTest.NOW;
import static io.registrycache.auth.ExternalTokensTest.generateEc;
import static io.registrycache.auth.ExternalTokensTest.generateRsa;
import static io.registrycache.auth.ExternalTokensTest.settings;
import static io.registrycache.auth.ExternalTokensTest.token;
import static org.assertj.core.api.Assertions.assertThat;

import com.nimbusds.jose.jwk.ECKey;
import com.nimbusds.jose.jwk.JWK;
import com.nimbusds.jose.jwk.JWKSet;
import com.nimbusds.jose.jwk.RSAKey;
import io.registrycache.config.RegistryCacheProperties;
import io.registrycache.testsupport.ScriptedHttp;
import java.nio.charset.StandardCharsets;
import java.time.Clock;
import java.time.ZoneOffset;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicReference;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

/** A trusted issuer's JWK set served over real HTTP on loopback by a server the test starts. */
class ExternalTokensJwksUrlTest {

  private final AtomicReference<JWKSet> served = new AtomicReference<>();
  private final AtomicInteger fetches = new AtomicInteger();
  private ScriptedHttp server;

  @BeforeEach
  void start() {
    server = new ScriptedHttp();
    server.route(
        "/.well-known/jwks.json",
        exchange -> {
          fetches.incrementAndGet();
          byte[] body = served.get().toString(true).getBytes(StandardCharsets.UTF_8);
          ScriptedHttp.respond(exchange, 200, Map.of("Content-Type", "application/json"), body);
        });
  }

  @AfterEach
  void stop() {
    server.close();
  }

  private ExternalTokens tokens() {
    Map<String, String> map =
        settings(
            "registry-cache.auth.trusted-issuers[0].jwks-url",
            server.baseUrl() + "/.well-known/jwks.json",
            "registry-cache.auth.trusted-issuers[0].jwks-timeout",
            "2s");
    return new ExternalTokens(
        RegistryCacheProperties.bind(map), Clock.fixed(NOW, ZoneOffset.UTC), System::nanoTime);
  }

  private void serve(JWK... keys) {
    served.set(new JWKSet(List.of(keys)).toPublicJWKSet());
  }

  @Test
  void aKeyThatAppearsAtTheUrlIsFetchedForItsKid() {
    RSAKey first = generateRsa("2026-11");
    ECKey next = generateEc("2026-12");
    serve(first);
    ExternalTokens tokens = tokens();
    assertThat(fetches).as("nothing fetched before the first token").hasValue(0);

    assertThat(tokens.verify(token(first)))
        .hasValue(
            Identity.external(ExternalTokensTest.ISSUER_KEY, "alice", Set.of("platform", "ci")));
    assertThat(tokens.verify(token(first, c -> c.subject("bob")))).isPresent();
    assertThat(fetches).as("the set is cached").hasValue(1);

    serve(first, next); // the issuer rotates: a new kid appears
    assertThat(tokens.verify(token(next))).as("a token of the new key").isPresent();
    assertThat(fetches).as("fetched again for the unknown kid").hasValue(2);
    assertThat(tokens.verify(token(first))).as("the old key, still listed").isPresent();
    assertThat(tokens.verify(token(next, c -> c.subject("carol")))).isPresent();
    assertThat(fetches).hasValue(2);

    assertThat(tokens.verify(token(generateRsa("2026-12"))))
        .as("another key under a listed kid")
        .isEmpty();
    assertThat(tokens.verify(token(generateRsa("never-listed"))))
        .as("a kid the issuer never listed")
        .isEmpty();
    assertThat(fetches)
        .as("at most twice per 30 s: an unknown kid cannot make the cache hammer the issuer")
        .hasValue(2);
  }

  @Test
  void anUnreachableJwksUrlRefusesTokensWithoutError() {
    serve(generateRsa("k"));
    ExternalTokens tokens = tokens();
    server.close();
    assertThat(tokens.verify(token(generateRsa("k")))).isEmpty();
  }
}
