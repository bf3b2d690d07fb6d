package io.registrycache.proxy;

import static io.registrycache.testsupport.CacheClient.describe;
import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import io.registrycache.testsupport.CacheClient;
import io.registrycache.testsupport.CacheProperties;
import io.registrycache.testsupport.Command;
import io.registrycache.testsupport.GoTools;
import io.registrycache.testsupport.ImagePusher;
import io.registrycache.testsupport.ManualCache;
import io.registrycache.testsupport.NeedsGoTool;
import io.registrycache.testsupport.TestImages;
import io.registrycache.testsupport.TestImages.Artifact;
import io.registrycache.testsupport.TestImages.Image;
import java.io.IOException;
import java.net.ServerSocket;
import java.net.URI;
import java.net.URLEncoder;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import org.awaitility.core.ConditionTimeoutException;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import tools.jackson.databind.JsonNode;
import tools.jackson.databind.json.JsonMapper;

/**
 * The referrers API through the cache in front of an upstream that implements it:
 * go-containerregistry's in-memory registry (the one {@code crane registry serve} runs), built from
 * {@code src/test/go/referrers-registry} with its referrers API on (the crane command leaves it
 * off), listening on loopback. Proxied, cached for {@code referrers.ttl}, then served stale with
 * the upstream gone, and in offline mode.
 */
@NeedsGoTool("go")
class ReferrersApiIT {

  static final String HOST = "api.test";
  static final String SIGNATURE = "application/vnd.dev.cosign.artifact.sig.v1+json";
  static final String SBOM = "application/spdx+json";
  static final JsonMapper JSON = JsonMapper.builder().build();

  @TempDir static Path storage;
  @TempDir static Path work;

  static Process registry;
  static Path registryLog;
  static String registryUrl;

  @BeforeAll
  static void startRegistry() throws Exception {
    Path go = GoTools.require("go");
    Path binary = work.resolve("referrers-registry");
    Command.run(
            Duration.ofMinutes(5),
            go.toString(),
            "-C",
            Path.of("src/test/go/referrers-registry").toAbsolutePath().toString(),
            "build",
            "-o",
            binary.toString(),
            ".")
        .assertSuccess();
    int port;
    try (ServerSocket socket = new ServerSocket(0)) {
      port = socket.getLocalPort();
    }
    registryUrl = "http://127.0.0.1:" + port;
    registryLog = work.resolve("registry.log");
    registry =
        new ProcessBuilder(binary.toString(), "-address", "127.0.0.1:" + port)
            .redirectErrorStream(true)
            .redirectOutput(registryLog.toFile())
            .start();
    HttpClient http = HttpClient.newHttpClient();
    try {
      await("referrers-registry answering /v2/")
          .atMost(Duration.ofSeconds(10))
          .pollDelay(Duration.ZERO)
          .pollInterval(Duration.ofMillis(100))
          .ignoreExceptionsInstanceOf(IOException.class) // not listening yet
          .until(
              () ->
                  http.send(
                              HttpRequest.newBuilder(URI.create(registryUrl + "/v2/")).build(),
                              HttpResponse.BodyHandlers.discarding())
                          .statusCode()
                      == 200);
    } catch (ConditionTimeoutException notStarted) {
      throw new IllegalStateException(
          "referrers-registry did not start:\n" + Files.readString(registryLog), notStarted);
    }
  }

  @AfterAll
  static void stopRegistry() throws InterruptedException {
    if (registry != null) {
      registry.destroy();
      registry.waitFor();
    }
  }

  static ManualCache startCache(String ttl, boolean offline) {
    return ManualCache.start(
        CacheProperties.cache(storage)
            .set("registry-cache.default-upstream", "api")
            .set("registry-cache.upstreams.api.host", HOST)
            .set("registry-cache.upstreams.api.url", registryUrl)
            .set("registry-cache.referrers.ttl", ttl)
            .set("registry-cache.referrers.page-size", "1")
            .set("registry-cache.offline", offline));
  }

  static long upstreamReferrersRequests() throws IOException {
    return Files.readAllLines(registryLog).stream().filter(l -> l.contains("/referrers/")).count();
  }

  @Test
  void proxiesCachesFiltersAndServesStaleAndOffline() throws Exception {
    ImagePusher pusher = new ImagePusher(registryUrl);
    String repo = TestImages.uniqueRepository("referrers-api");
    Image image = pusher.push(TestImages.smallOci(repo, "v1"));
    Artifact signature =
        pusher.push(repo, TestImages.artifact(SIGNATURE, image.manifest(), "signature", true));
    Artifact sbom = pusher.push(repo, TestImages.artifact(SBOM, image.manifest(), "sbom", true));
    String subject = image.manifest().digest();
    List<String> forms =
        List.of(
            "/v2/" + repo + "/referrers/" + subject,
            "/v2/" + HOST + "/" + repo + "/referrers/" + subject,
            "/v2/" + repo + "/referrers/" + subject + "?ns=" + HOST);
    List<String> both = List.of(signature.manifest().digest(), sbom.manifest().digest());

    try (ManualCache running = startCache("1h", false)) {
      CacheClient cache = running.client().withTimeout(Duration.ofSeconds(20));
      long cold = System.nanoTime();
      HttpResponse<byte[]> first = cache.get(forms.get(0));
      long coldMs = (System.nanoTime() - cold) / 1_000_000;
      long warm = System.nanoTime();
      cache.get(forms.get(0));
      System.out.printf(
          "referrers via upstream API (go-containerregistry): cold %d ms, warm %d ms%n",
          coldMs, (System.nanoTime() - warm) / 1_000_000);
      assertThat(first.statusCode()).as(describe(first)).isEqualTo(200);
      long asked = upstreamReferrersRequests();
      assertThat(asked).isEqualTo(1);

      for (String form : forms) {
        assertThat(ReferrersIT.allPages(cache, form))
            .as(form)
            .containsExactlyInAnyOrderElementsOf(both);
        HttpResponse<byte[]> filtered =
            cache.get(
                ReferrersIT.withQuery(
                    form, "artifactType=" + URLEncoder.encode(SIGNATURE, StandardCharsets.UTF_8)));
        assertThat(filtered.headers().firstValue("OCI-Filters-Applied")).hasValue("artifactType");
        JsonNode manifests = JSON.readTree(filtered.body()).path("manifests");
        assertThat(manifests).hasSize(1);
        assertThat(manifests.get(0).path("digest").asString())
            .isEqualTo(signature.manifest().digest());
        assertThat(
                manifests.get(0).path("annotations").path("io.registrycache.test.note").asString())
            .isEqualTo(signature.annotation());
      }
      // Within the TTL the stored list answers: the upstream was asked once.
      assertThat(upstreamReferrersRequests()).isEqualTo(asked);
      HttpResponse<byte[]> sig =
          cache.getManifest("/v2/" + repo + "/manifests/" + signature.manifest().digest());
      assertThat(sig.body()).isEqualTo(signature.manifest().bytes());

      String management =
          running.context().getEnvironment().getRequiredProperty("local.management.port");
      String prometheus =
          new String(
              CacheClient.onPort(Integer.parseInt(management)).get("/actuator/prometheus").body(),
              StandardCharsets.UTF_8);
      assertThat(prometheus)
          .containsPattern(
              "registry_cache_requests_total\\{kind=\"referrers\",result=\"miss\",upstream=\"api\"} 1");
      assertThat(prometheus)
          .containsPattern(
              "registry_cache_requests_total\\{kind=\"referrers\",result=\"hit\",upstream=\"api\"}");
    }

    // A new signature appears once the TTL is over (ttl 0: asked every time).
    Artifact second =
        pusher.push(
            repo, TestImages.artifact(SIGNATURE, image.manifest(), "second signature", true));
    try (ManualCache running = startCache("0s", false)) {
      assertThat(ReferrersIT.allPages(running.client(), forms.get(0)))
          .containsExactlyInAnyOrder(both.get(0), both.get(1), second.manifest().digest());
    }

    stopRegistry();
    List<String> all = List.of(both.get(0), both.get(1), second.manifest().digest());
    try (ManualCache stale = startCache("0s", false)) {
      for (String form : forms) {
        assertThat(ReferrersIT.allPages(stale.client().withTimeout(Duration.ofSeconds(30)), form))
            .as("upstream gone: " + form)
            .containsExactlyInAnyOrderElementsOf(all);
      }
    }
    try (ManualCache offline = startCache("0s", true)) {
      assertThat(ReferrersIT.allPages(offline.client(), forms.get(2)))
          .as("offline")
          .containsExactlyInAnyOrderElementsOf(all);
    }
  }
}
