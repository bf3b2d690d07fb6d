package io.registrycache.management;

import static org.assertj.core.api.Assertions.assertThat;

import io.registrycache.RegistryCacheApplication;
import io.registrycache.testsupport.CacheProperties;
import io.registrycache.testsupport.RawHttp;
import io.registrycache.testsupport.TestFiles;
import java.io.IOException;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.file.Files;
import java.nio.file.Path;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;
import org.springframework.boot.test.context.SpringBootTest;
import org.springframework.boot.test.system.CapturedOutput;
import org.springframework.boot.test.system.OutputCaptureExtension;
import org.springframework.boot.test.web.server.LocalManagementPort;
import org.springframework.test.context.DynamicPropertyRegistry;
import org.springframework.test.context.DynamicPropertySource;

/**
 * With a token (here from a file, as from a mounted Secret) the management port's admin operations,
 * metrics, info and the links need {@code Authorization: Bearer <token>}; health, its probes and
 * prometheus stay open, whatever {@code Authorization} says; the token is never logged.
 */
@SpringBootTest(
    classes = RegistryCacheApplication.class,
    webEnvironment = SpringBootTest.WebEnvironment.RANDOM_PORT)
@ExtendWith(OutputCaptureExtension.class)
class ManagementTokenTest {

  private static final HttpClient HTTP = HttpClient.newHttpClient();
  static final String TOKEN = "s3cret-admin-token-7f1c";
  static final Path storage = TestFiles.tempDirectory("registry-cache-admin-token-");

  @LocalManagementPort int managementPort;

  @DynamicPropertySource
  static void properties(DynamicPropertyRegistry registry) throws IOException {
    Path tokenFile = storage.resolveSibling(storage.getFileName() + ".token");
    Files.writeString(tokenFile, TOKEN + "\n");
    CacheProperties.cache(storage)
        .set("registry-cache.admin.token-file", tokenFile::toString)
        .addTo(registry);
  }

  static HttpResponse<String> send(String method, String url, String... headers) throws Exception {
    HttpRequest.Builder b =
        HttpRequest.newBuilder(URI.create(url))
            .method(
                method,
                "POST".equals(method)
                    ? HttpRequest.BodyPublishers.ofString("{}")
                    : HttpRequest.BodyPublishers.noBody());
    if ("POST".equals(method)) {
      b.header("Content-Type", "application/json");
    }
    for (int i = 0; i < headers.length; i += 2) {
      b.header(headers[i], headers[i + 1]);
    }
    return HTTP.send(b.build(), HttpResponse.BodyHandlers.ofString());
  }

  private String mgmt(String path) {
    return "http://127.0.0.1:" + managementPort + "/actuator" + path;
  }

  @Test
  void adminOperationsNeedTheBearerToken(CapturedOutput output) throws Exception {
    for (String[] call :
        new String[][] {
          {"POST", "/cache/janitor"},
          {"POST", "/cache/prune"},
          {"GET", "/cache"},
          {"GET", "/cache/images"},
          {"GET", "/metrics"},
          {"GET", "/info"},
          {"GET", ""}
        }) {
      HttpResponse<String> none = send(call[0], mgmt(call[1]));
      assertThat(none.statusCode()).as(call[0] + " " + call[1]).isEqualTo(401);
      assertThat(none.headers().firstValue("WWW-Authenticate"))
          .contains("Bearer realm=\"registry-cache management\"");
      HttpResponse<String> wrong =
          send(call[0], mgmt(call[1]), "Authorization", "Bearer " + TOKEN + "x");
      assertThat(wrong.statusCode()).isEqualTo(401);
      assertThat(wrong.headers().firstValue("WWW-Authenticate"))
          .hasValueSatisfying(
              v ->
                  assertThat(v)
                      .startsWith(
                          "Bearer realm=\"registry-cache management\", error=\"invalid_token\""));
      assertThat(send(call[0], mgmt(call[1]), "Authorization", "Basic " + TOKEN).statusCode())
          .isEqualTo(401);
      // a token a client cannot send in a header (not an RFC 6750 b64token) is refused the same way
      assertThat(
              send(call[0], mgmt(call[1]), "Authorization", "Bearer " + TOKEN + " x").statusCode())
          .isEqualTo(401);
    }
    HttpResponse<String> janitor =
        send("POST", mgmt("/cache/janitor"), "Authorization", "Bearer " + TOKEN);
    assertThat(janitor.statusCode()).as(janitor.body()).isEqualTo(200);
    assertThat(janitor.body()).contains("storedBytes");
    assertThat(send("GET", mgmt("/cache"), "Authorization", "bearer " + TOKEN).statusCode())
        .isEqualTo(200);
    assertThat(output.getAll()).doesNotContain(TOKEN).doesNotContain("generated security password");
  }

  @Test
  void healthProbesAndPrometheusStayOpenWhateverAuthorizationSays() throws Exception {
    for (String path :
        new String[] {"/health", "/health/liveness", "/health/readiness", "/prometheus"}) {
      assertThat(send("GET", mgmt(path)).statusCode()).as(path).isEqualTo(200);
      assertThat(send("GET", mgmt(path), "Authorization", "Bearer wrong").statusCode())
          .as(path)
          .isEqualTo(200);
      assertThat(send("GET", mgmt(path), "Authorization", "Bearer ###").statusCode())
          .as(path)
          .isEqualTo(200);
    }
  }

  @Test
  void pathsTheFirewallRefusesAre400WithAJsonBody() throws Exception {
    for (String path :
        new String[] {
          "/health/../cache",
          "/health/%2e%2e/cache",
          ";x=y/cache",
          "/cache%2Fimages",
          "/health/..",
          "/./cache"
        }) {
      RawHttp.Response r = RawHttp.get(managementPort, "/actuator" + path);
      assertThat(r.status()).as(path + " -> " + r).isEqualTo(400);
      assertThat(r.header("Content-Type")).startsWith("application/json");
      assertThat(r.bodyText()).startsWith("{\"error\":\"request refused: ");
    }
    for (String method : new String[] {"TRACE", "BREW"}) {
      RawHttp.Response r =
          RawHttp.send(managementPort, method, "/actuator/health", RawHttp.host(managementPort));
      assertThat(r.status()).as(method + " -> " + r).isEqualTo(400);
    }
  }
}
