package io.registrycache.api;

import static io.registrycache.testsupport.CacheClient.describe;
import static io.registrycache.testsupport.CacheClient.errorCode;
import static org.assertj.core.api.Assertions.assertThat;

import io.registrycache.RegistryCacheApplication;
import io.registrycache.testsupport.CacheClient;
import io.registrycache.testsupport.CacheProperties;
import io.registrycache.testsupport.ScriptedHttp;
import io.registrycache.testsupport.Sha256;
import io.registrycache.testsupport.TestFiles;
import java.io.IOException;
import java.net.InetAddress;
import java.net.Socket;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.util.Arrays;
import java.util.List;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;
import org.springframework.boot.test.context.SpringBootTest;
import org.springframework.boot.test.system.CapturedOutput;
import org.springframework.boot.test.system.OutputCaptureExtension;
import org.springframework.boot.test.web.server.LocalServerPort;
import org.springframework.test.context.DynamicPropertyRegistry;
import org.springframework.test.context.DynamicPropertySource;

/**
 * The registry port against hostile clients and a misbehaving upstream (issue 7 points 7 and 11):
 * every answer is the spec's status with an OCI error body, and request-derived strings cannot
 * forge log lines. The upstream is a scripted loopback server ({@link ScriptedHttp}), since
 * registry:2 cannot cut a response after its headers on demand.
 */
@SpringBootTest(
    classes = RegistryCacheApplication.class,
    // With the tests' logback-test.xml: EscapingLogbackLoggingSystem escapes messages in any
    // configuration (its own test covers Spring Boot's built-in one, what the service ships with).
    webEnvironment = SpringBootTest.WebEnvironment.RANDOM_PORT)
@ExtendWith(OutputCaptureExtension.class)
class PullPortHardeningTest {

  static final ScriptedHttp upstream = new ScriptedHttp();
  static final Path storage = TestFiles.tempDirectory("registry-cache-hardening-");

  @LocalServerPort int port;
  CacheClient cache;

  @DynamicPropertySource
  static void properties(DynamicPropertyRegistry registry) {
    CacheProperties.cache(storage)
        .localUpstream(upstream::baseUrl)
        .upstream("retry.max-attempts", "1")
        .upstream("circuit-breaker.enabled", "false")
        .addTo(registry);
  }

  @AfterAll
  static void stop() {
    upstream.close();
  }

  @BeforeEach
  void client() {
    cache = CacheClient.onPort(port);
  }

  private static void assertOciError(HttpResponse<byte[]> response, int status, String code) {
    assertThat(response.statusCode()).as(describe(response)).isEqualTo(status);
    assertThat(response.headers().firstValue("Content-Type"))
        .hasValueSatisfying(t -> assertThat(t).startsWith("application/json"));
    assertThat(errorCode(response)).as(describe(response)).isEqualTo(code);
  }

  @Test
  void crLfAndNulInARepositoryNameCannotForgeALogLine(CapturedOutput output) {
    String forged = "FORGED-LINE INFO io.registrycache.admin : user=admin logged in";
    HttpResponse<byte[]> response =
        cache.get("/v2/evil%0d%0a" + forged.replace(" ", "%20") + "%00x/manifests/latest");
    assertOciError(response, 400, "NAME_INVALID");

    List<String> lines = Arrays.asList(output.getAll().split("\\R"));
    assertThat(lines).noneMatch(l -> l.startsWith("FORGED-LINE"));
    assertThat(lines).noneMatch(l -> l.indexOf('\0') >= 0);
    assertThat(output.getAll()).contains("evil\\r\\nFORGED-LINE INFO").contains("\\0x");
  }

  /**
   * Sends {@code target} as is (java.net.http refuses malformed URIs); answers status line and
   * body.
   */
  private String raw(String method, String target) throws IOException {
    try (Socket socket = new Socket(InetAddress.getLoopbackAddress(), port)) {
      socket.setSoTimeout(10_000);
      socket
          .getOutputStream()
          .write(
              (method + " " + target + " HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
                  .getBytes(StandardCharsets.ISO_8859_1));
      return new String(socket.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
    }
  }

  @Test
  void malformedPercentEscapesInPathOrQueryAre400WithAnOciBody() throws IOException {
    for (String target :
        List.of(
            "/v2/app%zz/manifests/latest",
            "/v2/app/blobs/sha256%4",
            "/v2/app/tags/list?n=%zz",
            "/v2/app/manifests/latest?ns=%G0")) {
      String answer = raw("GET", target);
      assertThat(answer)
          .as(target)
          .startsWith("HTTP/1.1 400 ")
          .contains("application/json")
          .endsWith(
              "{\"errors\":[{\"code\":\"NAME_INVALID\",\"message\":"
                  + "\"malformed request target: an invalid percent-escape or a character not allowed in a URI\"}]}");
    }
    String head = raw("HEAD", "/v2/app%zz/manifests/latest");
    assertThat(head).startsWith("HTTP/1.1 400 ").endsWith("\r\n\r\n");
    // Still serving.
    assertThat(cache.get("/v2/").statusCode()).isEqualTo(200);
  }

  @Test
  void upstreamClosingRightAfterTheBlobHeadersIs502WithAnOciBody() {
    byte[] content = "layer bytes that never arrive".getBytes(StandardCharsets.UTF_8);
    String digest = Sha256.digest(content);
    upstream.route(
        "/v2/cut/blobs/" + digest,
        ex -> ScriptedHttp.sendTruncated(ex, "application/octet-stream", content, 0, digest));

    HttpResponse<byte[]> response = cache.get("/v2/cut/blobs/" + digest);
    assertOciError(response, 502, "UPSTREAM_UNAVAILABLE");
    // Nothing half-downloaded stays behind: the blob is asked for again next time.
    long before = upstream.count("GET", "/v2/cut/blobs/" + digest);
    cache.get("/v2/cut/blobs/" + digest);
    assertThat(upstream.count("GET", "/v2/cut/blobs/" + digest)).isGreaterThan(before);
  }

  @Test
  void upstreamClosingRightAfterTheManifestHeadersIs502WithAnOciBody() {
    byte[] body = "{\"schemaVersion\":2}".getBytes(StandardCharsets.UTF_8);
    upstream.route(
        "/v2/cutm/manifests/v1",
        ex ->
            ScriptedHttp.sendTruncated(
                ex, "application/vnd.oci.image.manifest.v1+json", body, 0, null));
    assertOciError(cache.getManifest("/v2/cutm/manifests/v1"), 502, "UPSTREAM_UNAVAILABLE");
  }
}
