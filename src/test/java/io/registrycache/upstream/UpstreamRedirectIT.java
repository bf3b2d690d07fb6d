package io.registrycache.upstream;

import static org.assertj.core.api.Assertions.assertThat;

import com.sun.net.httpserver.HttpServer;
import io.registrycache.RegistryCacheApplication;
import io.registrycache.oci.Digest;
import io.registrycache.oci.MediaTypes;
import io.registrycache.testsupport.CacheProperties;
import io.registrycache.testsupport.ScriptedHttp;
import io.registrycache.testsupport.TestFiles;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.stream.Stream;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.Test;
import org.springframework.boot.test.context.SpringBootTest;
import org.springframework.boot.test.web.server.LocalManagementPort;
import org.springframework.boot.test.web.server.LocalServerPort;
import org.springframework.test.context.DynamicPropertyRegistry;
import org.springframework.test.context.DynamicPropertySource;

/**
 * The whole service behind an upstream that redirects a manifest request to the cache's own
 * management port (issue 7, point 1): the pull fails with 502 {@code UPSTREAM_UNAVAILABLE} naming
 * the upstream, and the actuator's JSON is neither stored nor served by digest.
 */
@SpringBootTest(
    classes = RegistryCacheApplication.class,
    webEnvironment = SpringBootTest.WebEnvironment.RANDOM_PORT)
class UpstreamRedirectIT {

  static final List<AutoCloseable> closeables = new ArrayList<>();
  static final HttpServer upstream = ScriptedHttp.server(closeables);
  static volatile int managementPortSeen;
  static final Path storage = TestFiles.tempDirectory("registry-cache-redirect-it-");

  static {
    upstream.createContext(
        "/v2/",
        ex ->
            ScriptedHttp.respond(
                ex,
                307,
                Map.of(
                    "Location",
                    "http://127.0.0.1:" + managementPortSeen + "/actuator/health/liveness"),
                new byte[0]));
  }

  @LocalServerPort int port;
  @LocalManagementPort int managementPort;

  private final HttpClient http =
      HttpClient.newBuilder().connectTimeout(Duration.ofSeconds(5)).build();

  @DynamicPropertySource
  static void properties(DynamicPropertyRegistry registry) {
    CacheProperties.cache(storage).localUpstream(() -> ScriptedHttp.base(upstream)).addTo(registry);
  }

  @AfterAll
  static void cleanUp() throws Exception {
    for (AutoCloseable c : closeables) {
      c.close();
    }
    TestFiles.deleteRecursively(storage);
  }

  @Test
  void manifestRedirectToTheManagementPortIsRefusedAndNothingIsStored() throws Exception {
    managementPortSeen = managementPort;
    byte[] actuator =
        get("http://127.0.0.1:" + managementPort + "/actuator/health/liveness").body();
    Digest actuatorDigest = Digest.sha256(actuator);

    HttpResponse<byte[]> byTag = get("http://127.0.0.1:" + port + "/v2/team/app/manifests/v1");
    String error = new String(byTag.body(), StandardCharsets.UTF_8);
    assertThat(byTag.statusCode()).as(error).isEqualTo(502);
    assertThat(error)
        .contains("UPSTREAM_UNAVAILABLE")
        .contains("upstream 'local'")
        .contains("refused");

    HttpResponse<byte[]> byDigest =
        get("http://127.0.0.1:" + port + "/v2/team/app/manifests/" + actuatorDigest);
    assertThat(byDigest.statusCode()).isNotEqualTo(200);
    assertThat(byDigest.body()).isNotEqualTo(actuator);
    try (Stream<Path> files = Files.walk(storage)) {
      assertThat(files.map(Path::toString)).noneMatch(p -> p.contains(actuatorDigest.hex()));
    }
  }

  private HttpResponse<byte[]> get(String url) throws Exception {
    return http.send(
        HttpRequest.newBuilder(URI.create(url))
            .header("Accept", String.join(", ", MediaTypes.ALL_MANIFESTS))
            .timeout(Duration.ofSeconds(30))
            .build(),
        HttpResponse.BodyHandlers.ofByteArray());
  }
}
