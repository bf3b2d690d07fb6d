package io.registrycache.upstream;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import com.sun.net.httpserver.HttpServer;
import com.sun.net.httpserver.HttpsServer;
import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import io.registrycache.oci.Digest;
import io.registrycache.oci.OciErrorCode;
import io.registrycache.oci.RepositoryName;
import io.registrycache.testsupport.ScriptedHttp;
import io.registrycache.testsupport.TestCertificate;
import io.registrycache.testsupport.TestUpstreams;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.springframework.http.HttpStatus;

/**
 * TLS settings against an HTTPS upstream with a self-signed certificate ({@link TestCertificate}):
 * {@code tls.ca-file} trusts it, nothing else does, {@code insecure-skip-verify} skips
 * verification.
 */
class TlsUpstreamTest {

  private static final Duration WAIT = Duration.ofSeconds(20);
  private static final RepositoryName NAME = RepositoryName.parse("team/app");
  private static final Digest DIGEST = Digest.sha256(new byte[] {1});

  /** What every blob HEAD answers: its length, 1234. */
  private static final byte[] BLOB = new byte[1234];

  private static final List<AutoCloseable> servers = new ArrayList<>();

  @TempDir static Path dir;
  static HttpServer plain;
  static Path caFile;
  static String url;
  static ReactorNettyUpstreamClient client;

  @BeforeAll
  static void start() {
    TestCertificate certificate = TestCertificate.create();
    caFile = certificate.writePem(dir.resolve("ca.pem"));
    HttpsServer server = ScriptedHttp.httpsServer(servers, certificate);
    url = ScriptedHttp.base(server);
    server.createContext("/v2/", ex -> ScriptedHttp.respond(ex, 200, Map.of(), BLOB));
    server.createContext(
        "/v2/secured/",
        ex -> {
          if ("Bearer tls-token".equals(ex.getRequestHeaders().getFirst("Authorization"))) {
            ScriptedHttp.respond(ex, 200, Map.of(), BLOB);
          } else {
            ScriptedHttp.respond(
                ex,
                401,
                Map.of("WWW-Authenticate", "Bearer realm=\"" + url + "/token\",service=\"tls\""),
                new byte[0]);
          }
        });
    server.createContext(
        "/token",
        ex ->
            ScriptedHttp.respond(
                ex,
                200,
                Map.of("Content-Type", "application/json"),
                "{\"token\":\"tls-token\",\"expires_in\":300}".getBytes(StandardCharsets.UTF_8)));
    // A plain-http upstream whose blobs live on the https server (a storage redirect).
    plain = ScriptedHttp.server(servers);
    plain.createContext(
        "/v2/",
        ex ->
            ScriptedHttp.respond(
                ex, 307, Map.of("Location", url + ex.getRequestURI().getPath()), new byte[0]));
    client = new ReactorNettyUpstreamClient(null, new SimpleMeterRegistry());
  }

  @AfterAll
  static void stop() throws Exception {
    client.destroy();
    for (AutoCloseable server : servers) {
      server.close();
    }
  }

  @Test
  void caFileMakesTheCertificateTrusted() {
    Upstream upstream = TestUpstreams.upstream("tls-ca", url, s -> s.put("tls.ca-file", caFile));
    assertThat(client.headBlob(upstream, NAME, DIGEST).block(WAIT)).isEqualTo(BLOB.length);
  }

  @Test
  void unknownCertificateIsRefused() {
    Upstream upstream = TestUpstreams.upstream("tls-default", url, s -> {});
    assertThatThrownBy(() -> client.headBlob(upstream, NAME, DIGEST).block(WAIT))
        .isInstanceOfSatisfying(
            UpstreamException.class,
            e -> {
              assertThat(e.code()).isEqualTo(OciErrorCode.UPSTREAM_UNAVAILABLE);
              assertThat(e.status()).isEqualTo(HttpStatus.BAD_GATEWAY);
              assertThat(e.getMessage()).contains("tls-default").contains("TLS failed");
            });
  }

  @Test
  void insecureSkipVerifyAcceptsAnything() {
    Upstream upstream =
        TestUpstreams.upstream("tls-insecure", url, s -> s.put("tls.insecure-skip-verify", true));
    assertThat(client.headBlob(upstream, NAME, DIGEST).block(WAIT)).isEqualTo(BLOB.length);
  }

  @Test
  void tokenRequestsUseTheUpstreamTlsToo() {
    // The token realm is https on the same self-signed certificate: only ca-file makes it work.
    Upstream upstream = TestUpstreams.upstream("tls-token", url, s -> s.put("tls.ca-file", caFile));
    assertThat(client.headBlob(upstream, RepositoryName.parse("secured/app"), DIGEST).block(WAIT))
        .isEqualTo(BLOB.length);
  }

  @Test
  void aPlainHttpUpstreamRedirectingToHttpsVerifiesTheCertificateWithTheJvmsCas() {
    // No tls.* settings: the connection builds no TLS context of its own, and Reactor Netty's
    // default one must still verify (the self-signed certificate is refused, not accepted).
    Upstream upstream =
        TestUpstreams.upstream(
            "plain-default",
            ScriptedHttp.base(plain),
            s -> s.put("redirect.allowed-hosts", List.of("127.0.0.1")));
    assertThatThrownBy(() -> client.headBlob(upstream, NAME, DIGEST).block(WAIT))
        .isInstanceOfSatisfying(
            UpstreamException.class,
            e -> {
              assertThat(e.code()).isEqualTo(OciErrorCode.UPSTREAM_UNAVAILABLE);
              assertThat(e.getMessage()).contains("plain-default").contains("TLS failed");
            });
  }

  @Test
  void aPlainHttpUpstreamRedirectingToHttpsUsesItsCaFile() {
    Upstream upstream =
        TestUpstreams.upstream(
            "plain-ca",
            ScriptedHttp.base(plain),
            s -> {
              s.put("redirect.allowed-hosts", List.of("127.0.0.1"));
              s.put("tls.ca-file", caFile);
            });
    assertThat(client.headBlob(upstream, NAME, DIGEST).block(WAIT)).isEqualTo(BLOB.length);
  }

  @Test
  void missingCaFileFailsWithTheSettingName() {
    Upstream upstream =
        TestUpstreams.upstream(
            "tls-missing", url, s -> s.put("tls.ca-file", dir.resolve("nope.pem")));
    assertThatThrownBy(() -> new UpstreamConnection(upstream))
        .hasMessageContaining("registry-cache.upstreams.tls-missing.tls.ca-file");
  }
}
