package io.registrycache.admin;

import static org.assertj.core.api.Assertions.assertThat;

import io.registrycache.testsupport.TestFiles;
import io.registrycache.testsupport.CacheProperties;
import io.registrycache.RegistryCacheApplication;
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
import org.springframework.boot.test.web.server.LocalServerPort;
import org.springframework.test.context.DynamicPropertyRegistry;
import org.springframework.test.context.DynamicPropertySource;

/**
 * Issue 7 point 5: with a token (here from a file, as from a mounted Secret) the management
 * port's admin operations need {@code Authorization: Bearer <token>}; health, its probes and
 * prometheus stay open; the registry port is untouched.
 */
@SpringBootTest(
    classes = RegistryCacheApplication.class,
    webEnvironment = SpringBootTest.WebEnvironment.RANDOM_PORT)
@ExtendWith(OutputCaptureExtension.class)
class AdminAccessTokenTest {

  private static final HttpClient HTTP = HttpClient.newHttpClient();
  static final String TOKEN = "s3cret-admin-token-7f1c";
  static final Path storage = TestFiles.tempDirectory("registry-cache-admin-token-");

  @LocalServerPort int port;
  @LocalManagementPort int managementPort;

  @DynamicPropertySource
  static void properties(DynamicPropertyRegistry registry) throws IOException {
    Path tokenFile = storage.resolveSibling(storage.getFileName() + ".token");
    Files.writeString(tokenFile, TOKEN + "\n");
    CacheProperties.cache(storage).set("registry-cache.admin.token-file", tokenFile::toString).addTo(registry);
  }

  static HttpResponse<String> send(String method, String url, String... headers) throws Exception {
    HttpRequest.Builder b = HttpRequest.newBuilder(URI.create(url))
        .method(method, "POST".equals(method) ? HttpRequest.BodyPublishers.ofString("{}") : HttpRequest.BodyPublishers.noBody());
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
    for (String[] call : new String[][] {{"POST", "/cache/janitor"}, {"POST", "/cache/prune"}, {"GET", "/cache"},
        {"GET", "/cache/images"}, {"GET", "/metrics"}, {"GET", ""}}) {
      HttpResponse<String> none = send(call[0], mgmt(call[1]));
      assertThat(none.statusCode()).as(call[0] + " " + call[1]).isEqualTo(401);
      assertThat(none.headers().firstValue("WWW-Authenticate")).hasValueSatisfying(v -> assertThat(v).startsWith("Bearer "));
      assertThat(send(call[0], mgmt(call[1]), "Authorization", "Bearer " + TOKEN + "x").statusCode()).isEqualTo(401);
      assertThat(send(call[0], mgmt(call[1]), "Authorization", "Basic " + TOKEN).statusCode()).isEqualTo(401);
    }
    HttpResponse<String> janitor = send("POST", mgmt("/cache/janitor"), "Authorization", "Bearer " + TOKEN);
    assertThat(janitor.statusCode()).as(janitor.body()).isEqualTo(200);
    assertThat(janitor.body()).contains("storedBytes");
    assertThat(send("GET", mgmt("/cache"), "Authorization", "bearer " + TOKEN).statusCode()).isEqualTo(200);
    assertThat(output.getAll()).doesNotContain(TOKEN);
  }

  @Test
  void healthProbesAndPrometheusStayOpen() throws Exception {
    for (String path : new String[] {"/health", "/health/liveness", "/health/readiness", "/prometheus"}) {
      assertThat(send("GET", mgmt(path)).statusCode()).as(path).isEqualTo(200);
    }
  }

  @Test
  void theRegistryPortIsUntouched() throws Exception {
    HttpResponse<String> base = send("GET", "http://127.0.0.1:" + port + "/v2/");
    assertThat(base.statusCode()).isEqualTo(200);
    assertThat(base.headers().firstValue("WWW-Authenticate")).isEmpty();
    assertThat(base.headers().map().keySet()).noneMatch(h -> h.equalsIgnoreCase("X-Frame-Options") || h.equalsIgnoreCase("Cache-Control"));
    // The actuator is not on the registry port at all.
    assertThat(send("POST", "http://127.0.0.1:" + port + "/actuator/cache/janitor").statusCode()).isEqualTo(404);
  }
}
