package io.registrycache.admin;

import static io.registrycache.testsupport.CacheClient.describe;
import static org.assertj.core.api.Assertions.assertThat;

import io.micrometer.core.instrument.MeterRegistry;
import io.registrycache.testsupport.CacheClient;
import io.registrycache.testsupport.CacheProperties;
import io.registrycache.testsupport.Sha256;
import io.registrycache.testsupport.TestImages;
import io.registrycache.testsupport.TestImages.Blob;
import io.registrycache.testsupport.TestImages.Image;
import io.registrycache.testsupport.TestImages.ImageIndex;
import io.registrycache.testsupport.TestImages.Manifest;
import io.registrycache.testsupport.UpstreamRegistryContainer;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.Objects;
import org.awaitility.Awaitility;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.MethodOrderer;
import org.junit.jupiter.api.Order;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestMethodOrder;
import org.springframework.beans.factory.annotation.Autowired;
import org.springframework.boot.test.context.SpringBootTest;
import org.springframework.boot.test.web.server.LocalManagementPort;
import org.springframework.boot.test.web.server.LocalServerPort;
import org.springframework.test.context.DynamicPropertyRegistry;
import org.springframework.test.context.DynamicPropertySource;
import tools.jackson.databind.JsonNode;
import tools.jackson.databind.json.JsonMapper;

/**
 * Preloading against the running service, registry:2 as upstream: the start-up file, the admin API
 * with and without a platform filter, what the upstream was asked for (its own request log),
 * idempotence, and that everything preloaded is then served with the upstream stopped.
 */
@SpringBootTest(webEnvironment = SpringBootTest.WebEnvironment.RANDOM_PORT)
@TestMethodOrder(MethodOrderer.OrderAnnotation.class)
class PreloadIT {

  static final UpstreamRegistryContainer upstream = new UpstreamRegistryContainer();
  static final Path storage;
  static final Path preloadFile;

  /** Index preloaded for linux/arm64 only. */
  static final ImageIndex armOnly;

  /** Index preloaded with every platform, by digest. */
  static final ImageIndex everyPlatform;

  /** A plain image, preloaded in the bare form (default upstream). */
  static final Image plain;

  /** A plain image named in the preload file. */
  static final Image fromFile;

  static {
    upstream.start();
    armOnly =
        upstream
            .pusher()
            .push(TestImages.index(TestImages.uniqueRepository("preload-arm"), "multi"));
    everyPlatform =
        upstream
            .pusher()
            .push(TestImages.index(TestImages.uniqueRepository("preload-all"), "multi"));
    plain =
        upstream
            .pusher()
            .push(TestImages.smallOci(TestImages.uniqueRepository("preload-plain"), "v1"));
    fromFile =
        upstream
            .pusher()
            .push(TestImages.dockerSchema2(TestImages.uniqueRepository("preload-file"), "v3"));
    try {
      storage = Files.createTempDirectory("preload-it-storage");
      preloadFile = Files.createTempFile("preload-it", ".txt");
      Files.writeString(
          preloadFile,
          "# images every node needs\n"
              + upstream.hostAndPort()
              + "/"
              + fromFile.repository()
              + ":v3   # in-path form\n"
              + "\n"
              + fromFile.repository()
              + ":never-pushed\n");
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
  }

  @DynamicPropertySource
  static void properties(DynamicPropertyRegistry registry) {
    CacheProperties.cache(storage)
        .localUpstream(upstream.hostAndPort(), upstream::baseUrl)
        .upstream("connect-timeout", "1s")
        .upstream("read-timeout", "3s")
        .set("registry-cache.manifests.tag-ttl", "1h")
        .set("registry-cache.preload.file", preloadFile::toString)
        .set("registry-cache.preload.concurrency", "2")
        .addTo(registry);
  }

  @AfterAll
  static void stop() {
    upstream.stop();
  }

  private static final JsonMapper JSON = JsonMapper.builder().build();

  @LocalServerPort int port;
  @LocalManagementPort int managementPort;
  @Autowired MeterRegistry meters;

  private CacheClient admin() {
    return CacheClient.onPort(managementPort);
  }

  private JsonNode json(HttpResponse<byte[]> r, int status) {
    assertThat(r.statusCode()).as(describe(r)).isEqualTo(status);
    return JSON.readTree(r.body());
  }

  private JsonNode post(String body, int status) {
    return json(
        admin()
            .send(
                "POST",
                "/actuator/cache/preload",
                body.getBytes(StandardCharsets.UTF_8),
                "Content-Type",
                "application/json"),
        status);
  }

  /** Polls the job until it is done (at most 60 s); returns its last view. */
  private JsonNode await(String id) throws InterruptedException {
    return Awaitility.await("preload job " + id + " done")
        .atMost(Duration.ofSeconds(60))
        .pollDelay(Duration.ZERO)
        .pollInterval(Duration.ofMillis(100))
        .until(
            () -> json(admin().get("/actuator/cache/preload/" + id), 200),
            job -> "done".equals(job.path("state").asString()));
  }

  private JsonNode preload(String body) throws InterruptedException {
    JsonNode accepted = post(body, 202);
    assertThat(accepted.path("status").asString())
        .isEqualTo("/actuator/cache/preload/" + accepted.path("id").asString());
    return await(accepted.path("id").asString());
  }

  /** A list as the admin API takes it: one JSON string, items separated by blanks. */
  private static String list(String... references) {
    return "\"" + String.join(" ", references) + "\"";
  }

  private long upstreamBlobGets() {
    upstream.syncLogs();
    return upstream.requests().stream()
        .filter(r -> r.method().equals("GET") && r.path().contains("/blobs/"))
        .count();
  }

  @Test
  @Order(1)
  void theFileIsPreloadedInTheBackgroundAfterStartUp() throws InterruptedException {
    JsonNode fileJob =
        Awaitility.await("a job for the preload file")
            .atMost(Duration.ofSeconds(60))
            .pollDelay(Duration.ZERO)
            .pollInterval(Duration.ofMillis(100))
            .until(
                () -> {
                  for (JsonNode job :
                      json(admin().get("/actuator/cache/preload"), 200).path("jobs")) {
                    if (job.path("source").asString().equals("file:" + preloadFile)) {
                      return job;
                    }
                  }
                  return null;
                },
                Objects::nonNull);
    JsonNode job = await(fileJob.path("id").asString());
    assertThat(job.path("total").asInt()).isEqualTo(2);
    assertThat(job.path("done").asInt()).isEqualTo(1);
    assertThat(job.path("failed").asInt()).isEqualTo(1);
    JsonNode good = job.path("references").get(0);
    assertThat(good.path("reference").asString())
        .isEqualTo(upstream.hostAndPort() + "/" + fromFile.repository() + ":v3");
    assertThat(good.path("state").asString()).isEqualTo("done");
    assertThat(good.path("digest").asString()).isEqualTo(fromFile.manifest().digest());
    assertThat(good.path("blobs").asInt()).isEqualTo(3);
    long size = fromFile.manifest().size() + fromFile.blobs().stream().mapToLong(Blob::size).sum();
    assertThat(good.path("bytes").asLong()).isEqualTo(size);
    assertThat(good.path("fetchedBytes").asLong()).isEqualTo(size);
    JsonNode bad = job.path("references").get(1);
    assertThat(bad.path("state").asString()).isEqualTo("failed");
    assertThat(bad.path("error").asString()).contains("MANIFEST_UNKNOWN");
  }

  @Test
  @Order(2)
  void badRequestsAreRefusedAndNothingStarts() {
    int jobsBefore = json(admin().get("/actuator/cache/preload"), 200).path("jobs").size();
    assertThat(post("{}", 400).path("error").asString()).contains("references");
    assertThat(post("{\"references\":\" # nothing\"}", 400).path("error").asString())
        .contains("references");
    // a JSON array cannot be bound by the actuator: refused, nothing started
    assertThat(
            admin()
                .send(
                    "POST",
                    "/actuator/cache/preload",
                    "{\"references\":[\"a:v1\"]}".getBytes(StandardCharsets.UTF_8),
                    "Content-Type",
                    "application/json")
                .statusCode())
        .isEqualTo(400);
    JsonNode invalid =
        post(
            "{\"references\":"
                + list("team/app:ok", "team/app:", "registry.example.com/x:v1")
                + "}",
            400);
    assertThat(invalid.path("references").size()).isEqualTo(2);
    assertThat(invalid.path("references").get(1).asString())
        .contains("registry.example.com")
        .contains("not configured");
    assertThat(
            post("{\"references\":\"team/app:v1\",\"platforms\":\"linux\"}", 400)
                .path("error")
                .asString())
        .contains("os/architecture");
    assertThat(admin().get("/actuator/cache/preload/nosuchjob").statusCode()).isEqualTo(404);
    assertThat(json(admin().get("/actuator/cache/preload"), 200).path("jobs").size())
        .isEqualTo(jobsBefore);
    // never on the registry port
    assertThat(CacheClient.onPort(port).get("/actuator/cache/preload").statusCode()).isEqualTo(404);
  }

  @Test
  @Order(3)
  void onlyTheChosenPlatformIsFetchedAndARerunFetchesNothing() throws InterruptedException {
    String host = upstream.hostAndPort();
    Image arm = armOnly.platform("arm64").image();
    Image amd = armOnly.platform("amd64").image();
    double doneBefore = meters.counter("registry.cache.preload.images", "result", "done").count();

    JsonNode armJob =
        preload(
            "{\"references\":"
                + list(host + "/" + armOnly.repository() + ":multi")
                + ",\"platforms\":\"linux/arm64\"}");
    assertThat(armJob.path("done").asInt()).as(armJob.toString()).isEqualTo(1);
    assertThat(armJob.path("platforms").get(0).asString()).isEqualTo("linux/arm64");
    JsonNode armRef = armJob.path("references").get(0);
    assertThat(armRef.path("manifests").asInt()).isEqualTo(2); // the index and arm64's manifest
    assertThat(armRef.path("blobs").asInt()).isEqualTo(arm.blobs().size());

    String everyDigest = everyPlatform.index().digest();
    JsonNode allJob =
        preload(
            "{\"references\":"
                + list(
                    host + "/" + everyPlatform.repository() + "@" + everyDigest,
                    plain.repository() + ":v1")
                + "}");
    assertThat(allJob.path("done").asInt()).as(allJob.toString()).isEqualTo(2);
    assertThat(allJob.path("failed").asInt()).isZero();
    assertThat(allJob.path("references").get(0).path("manifests").asInt()).isEqualTo(3);
    assertThat(allJob.path("references").get(0).path("blobs").asInt()).isEqualTo(6);
    assertThat(allJob.path("references").get(1).path("digest").asString())
        .isEqualTo(plain.manifest().digest());

    // The upstream's own log: arm64 fetched once each, amd64 never.
    upstream.syncLogs();
    String repo = "/v2/" + armOnly.repository();
    assertThat(upstream.countRequests("GET", repo + "/manifests/" + amd.manifest().digest()))
        .isZero();
    for (Blob blob : amd.blobs()) {
      assertThat(upstream.countRequests("GET", repo + "/blobs/" + blob.digest()))
          .as("amd64 blob")
          .isZero();
    }
    for (Blob blob : arm.blobs()) {
      assertThat(upstream.countRequests("GET", repo + "/blobs/" + blob.digest()))
          .as("arm64 blob")
          .isEqualTo(1);
    }
    assertThat(
            meters.counter("registry.cache.preload.images", "result", "done").count() - doneBefore)
        .isEqualTo(3);
    assertThat(meters.counter("registry.cache.preload.bytes").count()).isPositive();

    // Idempotent: the same lists again are hits, no blob is asked of the upstream.
    long blobGets = upstreamBlobGets();
    JsonNode armAgain =
        preload(
            "{\"references\":"
                + list(host + "/" + armOnly.repository() + ":multi")
                + ",\"platforms\":\"linux/arm64\"}");
    JsonNode allAgain =
        preload(
            "{\"references\":"
                + list(
                    host + "/" + everyPlatform.repository() + "@" + everyDigest,
                    plain.repository() + ":v1")
                + "}");
    assertThat(armAgain.path("done").asInt()).isEqualTo(1);
    assertThat(allAgain.path("done").asInt()).isEqualTo(2);
    assertThat(armAgain.path("fetchedBytes").asLong()).isZero();
    assertThat(allAgain.path("fetchedBytes").asLong()).isZero();
    assertThat(allAgain.path("bytes").asLong()).isEqualTo(allJob.path("bytes").asLong());
    assertThat(upstreamBlobGets()).isEqualTo(blobGets);
  }

  @Test
  @Order(4)
  void everythingPreloadedIsServedWithTheUpstreamStopped() {
    upstream.stopUpstream();
    CacheClient cache = CacheClient.onPort(port).withTimeout(Duration.ofSeconds(20));
    String host = upstream.hostAndPort();

    // arm64 only
    assertManifest(
        cache.getManifest("/v2/" + armOnly.repository() + "/manifests/multi"), armOnly.index());
    Image arm = armOnly.platform("arm64").image();
    assertManifest(
        cache.getManifest("/v2/" + armOnly.repository() + "/manifests/" + arm.manifest().digest()),
        arm.manifest());
    assertBlobs(cache, armOnly.repository(), arm);
    Image amd = armOnly.platform("amd64").image();
    HttpResponse<byte[]> notPreloaded =
        cache.getManifest("/v2/" + armOnly.repository() + "/manifests/" + amd.manifest().digest());
    assertThat(notPreloaded.statusCode()).as(describe(notPreloaded)).isIn(502, 503, 504);
    HttpResponse<byte[]> amdBlob =
        cache.get("/v2/" + armOnly.repository() + "/blobs/" + amd.layers().get(0).digest());
    assertThat(amdBlob.statusCode()).as(describe(amdBlob)).isIn(502, 503, 504);

    // every platform, preloaded by digest; also reachable in the in-path form
    assertManifest(
        cache.getManifest(
            "/v2/"
                + host
                + "/"
                + everyPlatform.repository()
                + "/manifests/"
                + everyPlatform.index().digest()),
        everyPlatform.index());
    for (var platform : everyPlatform.platforms()) {
      Image image = platform.image();
      assertManifest(
          cache.getManifest(
              "/v2/" + everyPlatform.repository() + "/manifests/" + image.manifest().digest()),
          image.manifest());
      assertBlobs(cache, everyPlatform.repository(), image);
    }

    // the plain image by tag and by digest, and the one from the file
    assertManifest(
        cache.getManifest("/v2/" + plain.repository() + "/manifests/v1"), plain.manifest());
    assertManifest(
        cache.getManifest("/v2/" + plain.repository() + "/manifests/" + plain.manifest().digest()),
        plain.manifest());
    assertBlobs(cache, plain.repository(), plain);
    assertManifest(
        cache.getManifest("/v2/" + fromFile.repository() + "/manifests/v3"), fromFile.manifest());
    assertBlobs(cache, fromFile.repository(), fromFile);

    // Preloading with the upstream down: what is cached is done (tag served from the cache),
    // what is not fails with the upstream's error; neither stops the other.
    JsonNode mixed;
    try {
      mixed =
          preload(
              "{\"references\":"
                  + list(
                      plain.repository() + ":v1", amd.repository() + "@" + amd.manifest().digest())
                  + "}");
    } catch (InterruptedException e) {
      throw new AssertionError(e);
    }
    assertThat(mixed.path("done").asInt()).as(mixed.toString()).isEqualTo(1);
    assertThat(mixed.path("failed").asInt()).isEqualTo(1);
    assertThat(mixed.path("references").get(1).path("error").asString())
        .contains("UPSTREAM_UNAVAILABLE");
  }

  private static void assertManifest(HttpResponse<byte[]> response, Manifest expected) {
    assertThat(response.statusCode()).as(describe(response)).isEqualTo(200);
    assertThat(response.body())
        .as("byte for byte as the upstream has it")
        .isEqualTo(expected.bytes());
    assertThat(response.headers().firstValue("Docker-Content-Digest")).hasValue(expected.digest());
    assertThat(response.headers().firstValue("Content-Type")).hasValue(expected.mediaType());
  }

  private static void assertBlobs(CacheClient cache, String repository, Image image) {
    for (Blob blob : image.blobs()) {
      HttpResponse<byte[]> response = cache.get("/v2/" + repository + "/blobs/" + blob.digest());
      assertThat(response.statusCode()).as(describe(response)).isEqualTo(200);
      assertThat(Sha256.digest(response.body())).isEqualTo(blob.digest());
      assertThat(response.body()).isEqualTo(blob.bytes());
    }
  }
}
