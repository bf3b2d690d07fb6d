package io.registrycache.upstream;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import com.sun.net.httpserver.HttpServer;
import com.sun.net.httpserver.HttpsConfigurator;
import com.sun.net.httpserver.HttpsServer;
import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import io.registrycache.oci.Digest;
import io.registrycache.oci.OciErrorCode;
import io.registrycache.oci.RepositoryName;
import io.registrycache.testsupport.TestUpstreams;
import java.io.FileInputStream;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.nio.file.Files;
import java.nio.file.Path;
import java.security.KeyStore;
import java.time.Duration;
import java.util.Base64;
import java.util.List;
import javax.net.ssl.KeyManagerFactory;
import javax.net.ssl.SSLContext;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.springframework.http.HttpStatus;

/**
 * TLS settings against an HTTPS upstream with a self-signed certificate made by the JDK's {@code
 * keytool}: {@code tls.ca-file} trusts it, nothing else does, {@code insecure-skip-verify} skips
 * verification.
 */
class TlsUpstreamTest {

  private static final Duration WAIT = Duration.ofSeconds(20);
  private static final RepositoryName NAME = RepositoryName.parse("team/app");
  private static final Digest DIGEST = Digest.sha256(new byte[] {1});

  @TempDir static Path dir;
  static HttpsServer server;
  static HttpServer plain;
  static Path caFile;
  static String url;
  static ReactorNettyUpstreamClient client;

  @BeforeAll
  static void start() throws Exception {
    Path keystore = dir.resolve("server.p12");
    String keytool = Path.of(System.getProperty("java.home"), "bin", "keytool").toString();
    Process p =
        new ProcessBuilder(
                keytool,
                "-genkeypair",
                "-alias",
                "server",
                "-keyalg",
                "EC",
                "-groupname",
                "secp256r1",
                "-dname",
                "CN=127.0.0.1",
                "-ext",
                "SAN=ip:127.0.0.1,dns:localhost",
                "-validity",
                "2",
                "-storetype",
                "PKCS12",
                "-keystore",
                keystore.toString(),
                "-storepass",
                "changeit",
                "-keypass",
                "changeit")
            .redirectErrorStream(true)
            .start();
    String out = new String(p.getInputStream().readAllBytes());
    assertThat(p.waitFor()).as(out).isZero();

    KeyStore store = KeyStore.getInstance("PKCS12");
    try (FileInputStream in = new FileInputStream(keystore.toFile())) {
      store.load(in, "changeit".toCharArray());
    }
    caFile = dir.resolve("ca.pem");
    Files.writeString(
        caFile,
        "-----BEGIN CERTIFICATE-----\n"
            + Base64.getMimeEncoder(64, "\n".getBytes())
                .encodeToString(store.getCertificate("server").getEncoded())
            + "\n-----END CERTIFICATE-----\n");

    KeyManagerFactory kmf = KeyManagerFactory.getInstance(KeyManagerFactory.getDefaultAlgorithm());
    kmf.init(store, "changeit".toCharArray());
    SSLContext ssl = SSLContext.getInstance("TLS");
    ssl.init(kmf.getKeyManagers(), null, null);
    server = HttpsServer.create(new InetSocketAddress(InetAddress.getLoopbackAddress(), 0), 10);
    server.setHttpsConfigurator(new HttpsConfigurator(ssl));
    server.createContext(
        "/v2/",
        ex -> {
          ex.getResponseHeaders().add("Content-Length", "1234");
          ex.sendResponseHeaders(200, -1);
          ex.close();
        });
    server.createContext(
        "/v2/secured/",
        ex -> {
          boolean ok = "Bearer tls-token".equals(ex.getRequestHeaders().getFirst("Authorization"));
          if (ok) {
            ex.getResponseHeaders().add("Content-Length", "1234");
          } else {
            ex.getResponseHeaders()
                .add(
                    "WWW-Authenticate",
                    "Bearer realm=\"https://127.0.0.1:"
                        + server.getAddress().getPort()
                        + "/token\",service=\"tls\"");
          }
          ex.sendResponseHeaders(ok ? 200 : 401, -1);
          ex.close();
        });
    server.createContext(
        "/token",
        ex -> {
          byte[] body = "{\"token\":\"tls-token\",\"expires_in\":300}".getBytes();
          ex.sendResponseHeaders(200, body.length);
          ex.getResponseBody().write(body);
          ex.close();
        });
    server.start();
    url = "https://127.0.0.1:" + server.getAddress().getPort();
    // A plain-http upstream whose blobs live on the https server (a storage redirect).
    plain = HttpServer.create(new InetSocketAddress(InetAddress.getLoopbackAddress(), 0), 10);
    plain.createContext(
        "/v2/",
        ex -> {
          ex.getResponseHeaders().add("Location", url + ex.getRequestURI().getPath());
          ex.sendResponseHeaders(307, -1);
          ex.close();
        });
    plain.start();
    client = new ReactorNettyUpstreamClient(null, new SimpleMeterRegistry());
  }

  @AfterAll
  static void stop() {
    client.destroy();
    server.stop(0);
    plain.stop(0);
  }

  @Test
  void caFileMakesTheCertificateTrusted() {
    Upstream upstream = TestUpstreams.upstream("tls-ca", url, s -> s.put("tls.ca-file", caFile));
    assertThat(client.headBlob(upstream, NAME, DIGEST).block(WAIT)).isEqualTo(1234);
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
    assertThat(client.headBlob(upstream, NAME, DIGEST).block(WAIT)).isEqualTo(1234);
  }

  @Test
  void tokenRequestsUseTheUpstreamTlsToo() {
    // The token realm is https on the same self-signed certificate: only ca-file makes it work.
    Upstream upstream = TestUpstreams.upstream("tls-token", url, s -> s.put("tls.ca-file", caFile));
    assertThat(client.headBlob(upstream, RepositoryName.parse("secured/app"), DIGEST).block(WAIT))
        .isEqualTo(1234);
  }

  @Test
  void aPlainHttpUpstreamRedirectingToHttpsVerifiesTheCertificateWithTheJvmsCas() {
    // No tls.* settings: the connection builds no TLS context of its own, and Reactor Netty's
    // default one must still verify (the self-signed certificate is refused, not accepted).
    Upstream upstream =
        TestUpstreams.upstream(
            "plain-default",
            "http://127.0.0.1:" + plain.getAddress().getPort(),
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
            "http://127.0.0.1:" + plain.getAddress().getPort(),
            s -> {
              s.put("redirect.allowed-hosts", List.of("127.0.0.1"));
              s.put("tls.ca-file", caFile);
            });
    assertThat(client.headBlob(upstream, NAME, DIGEST).block(WAIT)).isEqualTo(1234);
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
