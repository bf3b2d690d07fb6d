package io.registrycache.upstream;

import static io.registrycache.testsupport.ScriptedHttp.base;
import static io.registrycache.testsupport.ScriptedHttp.respond;
import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import com.google.cloud.tools.jib.api.Credential;
import com.sun.net.httpserver.HttpServer;
import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import io.registrycache.oci.Digest;
import io.registrycache.oci.OciErrorCode;
import io.registrycache.oci.RepositoryName;
import io.registrycache.testsupport.ScriptedHttp;
import io.registrycache.testsupport.TestUpstreams;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Base64;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicReference;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.springframework.web.reactive.function.client.WebClient;

/**
 * Token acquisition without jib-core: the Docker Registry token request as sent, the response as
 * parsed (token or access_token, expires_in) and the cache's reuse of a token for its own lifetime.
 */
class WebClientTokenProviderTest {

  private static final Duration WAIT = Duration.ofSeconds(20);
  private static final RepositoryName NAME = RepositoryName.parse("team/app");

  private final List<AutoCloseable> closeables = new ArrayList<>();
  private final List<String> requests = new CopyOnWriteArrayList<>();
  private final AtomicReference<String> tokenBody =
      new AtomicReference<>("{\"access_token\":\"abc.def\",\"expires_in\":300}");
  private HttpServer tokenServer;
  private WebClientTokenProvider provider;

  @BeforeEach
  void start() {
    tokenServer = ScriptedHttp.server(closeables);
    tokenServer.createContext(
        "/token",
        ex -> {
          requests.add(
              ex.getRequestURI().getRawQuery()
                  + " auth="
                  + ex.getRequestHeaders().getFirst("Authorization")
                  + " ua="
                  + ex.getRequestHeaders().getFirst("User-Agent"));
          respond(
              ex,
              200,
              Map.of("Content-Type", "application/json"),
              tokenBody.get().getBytes(StandardCharsets.UTF_8));
        });
    provider =
        new WebClientTokenProvider(
            u -> WebClient.create(), UpstreamAddressPolicy.NO_OWN_PORTS, "registry-cache-test");
  }

  @AfterEach
  void stop() throws Exception {
    for (AutoCloseable c : closeables) {
      c.close();
    }
  }

  private Upstream upstream() {
    return TestUpstreams.upstream("tokens", base(tokenServer), s -> {});
  }

  @Test
  void bearerChallengeFetchesAPullTokenWithTheCredential() {
    AuthChallenge challenge =
        AuthChallenge.parse(
            "Bearer realm=\""
                + base(tokenServer)
                + "/token\",service=\"svc\",scope=\"repository:ignored:push\"");

    UpstreamAuthorization authorization =
        provider
            .token(upstream(), NAME, challenge, Optional.of(Credential.from("u", "p")))
            .block(WAIT);

    assertThat(authorization.header()).isEqualTo("Bearer abc.def"); // access_token is accepted too
    assertThat(authorization.reuseFor())
        .isEqualTo(Duration.ofSeconds(270)); // expires_in 300 less 30 s
    // The scope is built from the repository, not taken from the challenge.
    assertThat(requests)
        .singleElement()
        .asString()
        .startsWith("service=svc&scope=repository:team/app:pull ")
        .contains("auth=Basic dTpw")
        .contains("ua=registry-cache-test");
  }

  @Test
  void bearerWithoutServiceUsesTheUpstreamAuthorityAndNoCredentialIsAnonymous() {
    tokenBody.set("{\"token\":\"t1\",\"issued_at\":\"2026-01-01T00:00:00Z\"}");
    AuthChallenge challenge =
        AuthChallenge.parse("Bearer realm=\"" + base(tokenServer) + "/token\"");

    UpstreamAuthorization authorization =
        provider.token(upstream(), NAME, challenge, Optional.empty()).block(WAIT);

    assertThat(authorization.header()).isEqualTo("Bearer t1");
    assertThat(authorization.reuseFor())
        .as("expires_in defaults to 60 s")
        .isEqualTo(Duration.ofSeconds(54));
    assertThat(requests)
        .singleElement()
        .asString()
        .startsWith(
            "service=127.0.0.1:"
                + tokenServer.getAddress().getPort()
                + "&scope=repository:team/app:pull auth=null");
  }

  @Test
  void responseWithoutATokenIsAnUpstreamError() {
    tokenBody.set("{\"expires_in\":60}");
    AuthChallenge challenge =
        AuthChallenge.parse("Bearer realm=\"" + base(tokenServer) + "/token\"");
    assertThatThrownBy(
            () -> provider.token(upstream(), NAME, challenge, Optional.empty()).block(WAIT))
        .isInstanceOfSatisfying(
            UpstreamException.class,
            e -> {
              assertThat(e.code()).isEqualTo(OciErrorCode.UPSTREAM_UNAVAILABLE);
              assertThat(e.getMessage()).contains("tokens").contains("no token or access_token");
            });
    tokenBody.set("not json");
    assertThatThrownBy(
            () -> provider.token(upstream(), NAME, challenge, Optional.empty()).block(WAIT))
        .isInstanceOfSatisfying(
            UpstreamException.class, e -> assertThat(e.getMessage()).contains("not JSON"));
  }

  @Test
  void bearerWithoutRealmIsUnauthorized() {
    assertThatThrownBy(
            () ->
                provider
                    .token(
                        upstream(),
                        NAME,
                        AuthChallenge.parse("Bearer service=\"x\""),
                        Optional.empty())
                    .block(WAIT))
        .isInstanceOfSatisfying(
            UpstreamException.class,
            e -> {
              assertThat(e.code()).isEqualTo(OciErrorCode.UNAUTHORIZED);
              assertThat(e.getMessage()).contains("realm");
            });
    assertThat(requests).isEmpty();
  }

  @Test
  void challengesAreParsedWithQuotedAndEscapedParameters() {
    AuthChallenge c =
        AuthChallenge.parse(
            "Bearer realm=\"https://a.example/t?x=1,y\",service=reg, scope=\"a\\\"b\"");
    assertThat(c.isBearer()).isTrue();
    assertThat(c.realm()).contains("https://a.example/t?x=1,y");
    assertThat(c.service()).contains("reg");
    assertThat(c.params()).containsEntry("scope", "a\"b");
    assertThat(AuthChallenge.parse("basic realm=\"x\"").isBasic()).isTrue();
    assertThat(AuthChallenge.parse("Negotiate abc").isBearer()).isFalse();
  }

  @Test
  void authorizationsNeverPrintTheirSecret() {
    assertThat(UpstreamAuthorization.basic("u", "hunter2").toString())
        .doesNotContain("hunter2")
        .doesNotContain(
            Base64.getEncoder().encodeToString("u:hunter2".getBytes(StandardCharsets.UTF_8)));
    assertThat(new UpstreamAuthorization("Bearer", "tok", Duration.ofSeconds(1)).toString())
        .doesNotContain("tok");
    // jib's Credential does print it: why nothing in this package ever logs one.
    assertThat(Credential.from("u", "hunter2").toString()).contains("hunter2");
  }

  @Test
  void aTokenIsReusedForItsOwnExpiresInAndNoLonger() throws Exception {
    // A registry whose tokens live 2 s (reused 1 s): a request 1.5 s later (on the token cache's
    // ticker, moved by the test) needs a new token.
    AtomicInteger issued = new AtomicInteger();
    HttpServer registry = ScriptedHttp.server(closeables);
    registry.createContext(
        "/token",
        ex -> {
          respond(
              ex,
              200,
              Map.of("Content-Type", "application/json"),
              ("{\"token\":\"t" + issued.incrementAndGet() + "\",\"expires_in\":2}")
                  .getBytes(StandardCharsets.UTF_8));
        });
    registry.createContext(
        "/v2/",
        ex -> {
          if (ex.getRequestHeaders().getFirst("Authorization") == null) {
            respond(
                ex,
                401,
                Map.of("WWW-Authenticate", "Bearer realm=\"" + base(registry) + "/token\""),
                new byte[0]);
          } else {
            respond(ex, 200, Map.of(), new byte[7]);
          }
        });
    Upstream upstream = TestUpstreams.upstream("short-tokens", base(registry), s -> {});
    AtomicLong nanos = new AtomicLong(System.nanoTime());
    SimpleMeterRegistry meters = new SimpleMeterRegistry();
    ReactorNettyUpstreamClient client =
        new ReactorNettyUpstreamClient(
            null, meters, new UpstreamResilience(null, meters), nanos::get);
    closeables.add(client::destroy);
    Digest digest = Digest.sha256(new byte[7]);

    assertThat(client.headBlob(upstream, NAME, digest).block(WAIT)).isEqualTo(7);
    assertThat(client.headBlob(upstream, NAME, digest).block(WAIT)).isEqualTo(7);
    assertThat(issued).as("reused within its lifetime").hasValue(1);
    nanos.addAndGet(Duration.ofMillis(999).toNanos());
    assertThat(client.headBlob(upstream, NAME, digest).block(WAIT)).isEqualTo(7);
    assertThat(issued).as("still reused just before its reuse time (1 s) is over").hasValue(1);
    nanos.addAndGet(Duration.ofMillis(501).toNanos());
    assertThat(client.headBlob(upstream, NAME, digest).block(WAIT)).isEqualTo(7);
    assertThat(issued)
        .as("a new token once the old one's expires_in (less a margin) has passed")
        .hasValue(2);
  }
}
