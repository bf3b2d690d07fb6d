package io.registrycache.upstream;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import com.google.cloud.tools.jib.api.Credential;
import com.google.cloud.tools.jib.api.RegistryAuthenticationFailedException;
import com.google.cloud.tools.jib.http.Authorization;
import com.google.cloud.tools.jib.http.FailoverHttpClient;
import com.google.cloud.tools.jib.registry.JibPullAuthenticator;
import com.google.cloud.tools.jib.registry.RegistryAuthenticator;
import com.sun.net.httpserver.HttpServer;
import io.registrycache.config.RegistryCacheProperties;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.nio.charset.StandardCharsets;
import java.util.List;
import java.util.Optional;
import java.util.concurrent.CopyOnWriteArrayList;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

/**
 * Pins the jib-core 0.28.1 behaviour the bridge relies on (split package, package-private API,
 * reflective FailoverHttpClient constructor). If this fails after a jib-core upgrade, re-read
 * docs/jib-core.md.
 */
class JibPullAuthenticatorTest {

  private HttpServer tokenServer;
  private final List<String> requests = new CopyOnWriteArrayList<>();
  private FailoverHttpClient http;

  @BeforeEach
  void start() throws Exception {
    tokenServer = HttpServer.create(new InetSocketAddress(InetAddress.getLoopbackAddress(), 0), 10);
    tokenServer.createContext("/token", ex -> {
      requests.add(ex.getRequestURI().getRawQuery() + " auth=" + ex.getRequestHeaders().getFirst("Authorization")
          + " ua=" + ex.getRequestHeaders().getFirst("User-Agent"));
      byte[] body = "{\"access_token\":\"abc.def\",\"expires_in\":300}".getBytes(StandardCharsets.UTF_8);
      ex.sendResponseHeaders(200, body.length);
      ex.getResponseBody().write(body);
      ex.close();
    });
    tokenServer.start();
    // The reflective constructor: fails here first if jib-core changes it.
    http = JibTokenHttp.newClient(true, true, e -> {}, () -> new com.google.api.client.http.apache.v2.ApacheHttpTransport());
  }

  @AfterEach
  void stop() throws Exception {
    http.shutDown();
    tokenServer.stop(0);
  }

  @Test
  void basicChallengeMeansNoTokenExchange() throws Exception {
    assertThat(JibPullAuthenticator.forChallenge("Basic realm=\"registry\"", "localhost:5000", "a/b", "ua", http)).isEmpty();
    assertThat(JibPullAuthenticator.forChallenge("basic realm=\"x\"", "localhost:5000", "a/b", "ua", http)).isEmpty();
  }

  @Test
  void bearerWithoutRealmIsRejected() {
    assertThatThrownBy(() -> JibPullAuthenticator.forChallenge("Bearer service=\"x\"", "localhost:5000", "a/b", "ua", http))
        .isInstanceOf(RegistryAuthenticationFailedException.class)
        .hasMessageContaining("realm");
    assertThatThrownBy(() -> JibPullAuthenticator.forChallenge("Negotiate abc", "localhost:5000", "a/b", "ua", http))
        .isInstanceOf(RegistryAuthenticationFailedException.class);
  }

  @Test
  void bearerChallengeFetchesAPullTokenWithTheCredential() throws Exception {
    String realm = "http://127.0.0.1:" + tokenServer.getAddress().getPort() + "/token";
    Optional<RegistryAuthenticator> authenticator =
        JibPullAuthenticator.forChallenge(
            "Bearer realm=\"" + realm + "\",service=\"svc\",scope=\"repository:ignored:push\"",
            "localhost:5000", "team/app", "registry-cache-test", http);

    Authorization authorization = authenticator.orElseThrow().authenticatePull(Credential.from("u", "p"));

    assertThat(authorization.getScheme()).isEqualTo("Bearer");
    assertThat(authorization.getToken()).isEqualTo("abc.def"); // access_token is accepted too
    // jib builds the scope from the repository it is given, not from the challenge's scope.
    assertThat(requests).singleElement().asString()
        .startsWith("service=svc&scope=repository:team/app:pull ")
        .contains("auth=Basic dTpw")
        .contains("ua=registry-cache-test");
  }

  @Test
  void bearerWithoutServiceUsesTheServerUrl() throws Exception {
    String realm = "http://127.0.0.1:" + tokenServer.getAddress().getPort() + "/token";
    JibPullAuthenticator.forChallenge("Bearer realm=\"" + realm + "\"", "localhost:5000", "a/b", "ua", http)
        .orElseThrow()
        .authenticatePull(null);
    assertThat(requests).singleElement().asString().startsWith("service=localhost:5000&scope=repository:a/b:pull auth=null");
  }

  @Test
  void plainHttpRealmIsRefusedWithoutFailover() throws Exception {
    FailoverHttpClient strict =
        JibTokenHttp.newClient(false, false, e -> {}, () -> new com.google.api.client.http.apache.v2.ApacheHttpTransport());
    try {
      String realm = "http://127.0.0.1:" + tokenServer.getAddress().getPort() + "/token";
      RegistryAuthenticator authenticator =
          JibPullAuthenticator.forChallenge("Bearer realm=\"" + realm + "\"", "h", "a/b", "ua", strict).orElseThrow();
      assertThatThrownBy(() -> authenticator.authenticatePull(null))
          .isInstanceOf(RegistryAuthenticationFailedException.class)
          .hasRootCauseInstanceOf(javax.net.ssl.SSLException.class);
      assertThat(requests).isEmpty();
    } finally {
      strict.shutDown();
    }
  }

  @Test
  void jibPrintsSecretsInToString() {
    // Why nothing in this package ever logs a Credential or an Authorization.
    assertThat(Credential.from("u", "hunter2").toString()).contains("hunter2");
    assertThat(Authorization.fromBearerToken("tok").toString()).contains("tok");
    RegistryCacheProperties.Upstream settings = new RegistryCacheProperties.Upstream();
    settings.setPassword("hunter2");
    assertThat(settings.toString()).doesNotContain("hunter2");
  }
}
