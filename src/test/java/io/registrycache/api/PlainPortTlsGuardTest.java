package io.registrycache.api;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.registrycache.RegistryCacheApplication;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.InetAddress;
import java.net.Socket;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import javax.net.ssl.SSLContext;
import javax.net.ssl.SSLException;
import javax.net.ssl.SSLSocket;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;
import org.springframework.boot.test.context.SpringBootTest;
import org.springframework.boot.test.system.CapturedOutput;
import org.springframework.boot.test.system.OutputCaptureExtension;
import org.springframework.boot.test.web.server.LocalServerPort;
import org.springframework.test.context.DynamicPropertyRegistry;
import org.springframework.test.context.DynamicPropertySource;

/**
 * A client that tries TLS first on the plain HTTP port (issue 9 point 12): it gets a plain-text
 * HTTP 400 (what makes Go clients fall back to HTTP), the log gets one line (per client address and
 * interval, issue 26 point 5) and no decoding stack, and plain HTTP on the same port is untouched.
 */
@SpringBootTest(
    classes = RegistryCacheApplication.class,
    webEnvironment = SpringBootTest.WebEnvironment.RANDOM_PORT,
    // Spring Boot's built-in levels (root INFO), what the service runs with: Reactor Netty's own
    // WARN would show there.
    properties = "logging.config=classpath:logback-boot-defaults.xml")
@ExtendWith(OutputCaptureExtension.class)
class PlainPortTlsGuardTest {

  @LocalServerPort int port;

  @DynamicPropertySource
  static void properties(DynamicPropertyRegistry registry) throws Exception {
    Path storage = Files.createTempDirectory("tls-guard-storage");
    registry.add("registry-cache.storage.path", storage::toString);
    registry.add("management.server.port", () -> "0");
  }

  @Test
  void aTlsHandshakeIsAnsweredWithAPlainHttp400AndOneLogLine(CapturedOutput output)
      throws Exception {
    SSLContext tls = SSLContext.getInstance("TLS");
    tls.init(null, null, null);
    for (int i = 0; i < 3; i++) {
      try (SSLSocket socket =
          (SSLSocket) tls.getSocketFactory().createSocket(InetAddress.getLoopbackAddress(), port)) {
        socket.setSoTimeout(5_000);
        assertThatThrownBy(socket::startHandshake).isInstanceOf(SSLException.class);
      }
    }
    // The raw answer a Go client sees instead of a ServerHello.
    try (Socket socket = new Socket(InetAddress.getLoopbackAddress(), port)) {
      socket.setSoTimeout(5_000);
      OutputStream out = socket.getOutputStream();
      out.write(new byte[] {PlainPortTlsGuard.TLS_HANDSHAKE, 3, 1, 0, 5, 1, 0, 0, 1, 0});
      out.flush();
      InputStream in = socket.getInputStream();
      String answer = new String(in.readAllBytes(), StandardCharsets.US_ASCII);
      assertThat(answer).startsWith("HTTP/1.1 400 Bad Request\r\n").contains("Connection: close");
    }

    String log = output.getAll();
    // four handshakes from one address: one INFO line, the other three at DEBUG (HandshakeLogTest)
    assertThat(log.lines().filter(line -> line.contains("TLS handshake from")).count())
        .isEqualTo(1);
    assertThat(log).doesNotContain("HttpServerOperations").doesNotContain("DecoderException");

    HttpResponse<String> plain =
        HttpClient.newHttpClient()
            .send(
                HttpRequest.newBuilder(URI.create("http://127.0.0.1:" + port + "/v2/")).build(),
                HttpResponse.BodyHandlers.ofString());
    assertThat(plain.statusCode()).isEqualTo(200);
    assertThat(plain.headers().firstValue("Docker-Distribution-API-Version"))
        .hasValue("registry/2.0");
  }
}
