package io.registrycache.api;

import static io.registrycache.testsupport.CacheClient.describe;
import static io.registrycache.testsupport.CacheClient.errorCode;
import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import io.micrometer.core.instrument.Counter;
import io.micrometer.core.instrument.MeterRegistry;
import io.registrycache.RegistryCacheApplication;
import io.registrycache.metrics.PullActivity;
import io.registrycache.testsupport.CacheClient;
import io.registrycache.testsupport.CacheProperties;
import io.registrycache.testsupport.ManualCache;
import io.registrycache.testsupport.ScriptedHttp;
import io.registrycache.testsupport.Sha256;
import io.registrycache.testsupport.TestFiles;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.net.URI;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Base64;
import java.util.List;
import java.util.Set;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.stream.Collectors;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.MethodOrderer;
import org.junit.jupiter.api.Order;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestMethodOrder;
import org.junit.jupiter.api.extension.ExtendWith;
import org.springframework.beans.factory.annotation.Autowired;
import org.springframework.boot.test.context.SpringBootTest;
import org.springframework.boot.test.system.CapturedOutput;
import org.springframework.boot.test.system.OutputCaptureExtension;
import org.springframework.boot.test.web.server.LocalServerPort;
import org.springframework.context.ApplicationContext;
import org.springframework.security.crypto.bcrypt.BCryptPasswordEncoder;
import org.springframework.test.context.DynamicPropertyRegistry;
import org.springframework.test.context.DynamicPropertySource;

/**
 * Issue 23, points 5 and 6, over real HTTP: the cache with {@code registry-cache.auth.enabled} and
 * {@code registry-cache.rate-limit.enabled}, in front of a scripted upstream that can hold a blob's
 * answer (so a fill is known to be running). Users alice and bob and robot ci each get 5 requests
 * per second (burst 10) and one concurrent fill; a client address may fail 3 credential checks. The
 * access log and the metrics name identities, never secrets, and label only robots by name. The
 * failed-check test runs last: it uses up the tries of the test client's address.
 */
@SpringBootTest(
    classes = RegistryCacheApplication.class,
    webEnvironment = SpringBootTest.WebEnvironment.RANDOM_PORT)
@ExtendWith(OutputCaptureExtension.class)
@TestMethodOrder(MethodOrderer.OrderAnnotation.class)
class RateLimitIT {

  static final String ROBOT_TOKEN = "5f2b8e1a4c7d0f3b6e9a2c5d8f1b4e7a0c3d6f9b";
  static final ScriptedHttp upstream = new ScriptedHttp();
  static final Path files = TestFiles.tempDirectory("rate-limit-it-");

  @DynamicPropertySource
  static void properties(DynamicPropertyRegistry registry) {
    try {
      Files.writeString(
          files.resolve("htpasswd"),
          "alice:"
              + new BCryptPasswordEncoder(4).encode("s3cret")
              + "\n"
              + "bob:"
              + new BCryptPasswordEncoder(4).encode("hunter2")
              + "\n");
      Files.writeString(files.resolve("tokens"), "ci:" + ROBOT_TOKEN + "\n");
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
    CacheProperties.cache(files.resolve("storage"))
        .localUpstream("scripted.test", upstream::baseUrl)
        .set("registry-cache.blobs.prefetch.enabled", "false")
        .set("registry-cache.access-log.enabled", "true")
        .set("registry-cache.auth.enabled", "true")
        .set("registry-cache.auth.htpasswd-file", files.resolve("htpasswd").toString())
        .set("registry-cache.auth.tokens-file", files.resolve("tokens").toString())
        .set("registry-cache.auth.rules[0].subjects", "authenticated")
        .set("registry-cache.auth.rules[0].repositories", "**")
        .set("registry-cache.rate-limit.enabled", "true")
        .set("registry-cache.rate-limit.authenticated.requests-per-second", "5")
        .set("registry-cache.rate-limit.authenticated.burst", "10")
        .set("registry-cache.rate-limit.authenticated.concurrent-fills", "1")
        .set("registry-cache.rate-limit.failed-checks.per-minute", "3")
        .set("registry-cache.rate-limit.failed-checks.burst", "3")
        .addTo(registry);
  }

  static String basic(String user, String password) {
    return "Basic "
        + Base64.getEncoder()
            .encodeToString((user + ":" + password).getBytes(StandardCharsets.UTF_8));
  }

  static final String ALICE = basic("alice", "s3cret");
  static final String BOB = basic("bob", "hunter2");
  static final String CI = basic("ci", ROBOT_TOKEN);

  @LocalServerPort int port;
  @Autowired MeterRegistry meters;
  @Autowired ApplicationContext context;
  @Autowired PullActivity activity;
  CacheClient cache;

  @BeforeEach
  void client() {
    cache = CacheClient.onPort(port);
  }

  @AfterAll
  static void stopUpstream() {
    upstream.close();
  }

  /** A blob the upstream answers at once; returns its path on the cache (and the upstream). */
  static String blob(String repository, String content) {
    byte[] bytes = content.getBytes(StandardCharsets.UTF_8);
    String digest = Sha256.digest(bytes);
    String path = "/v2/" + repository + "/blobs/" + digest;
    upstream.route(
        path, ex -> ScriptedHttp.send(ex, 200, "application/octet-stream", bytes, digest));
    return path;
  }

  HttpResponse<byte[]> get(String path, String authorization) {
    return cache.get(path, "Authorization", authorization);
  }

  CompletableFuture<HttpResponse<byte[]>> getAsync(String path, String authorization) {
    HttpRequest request =
        HttpRequest.newBuilder(URI.create(cache.baseUrl() + path))
            .header("Authorization", authorization)
            .timeout(Duration.ofSeconds(60))
            .GET()
            .build();
    return cache.http().sendAsync(request, HttpResponse.BodyHandlers.ofByteArray());
  }

  double counter(String name, String... tags) {
    Counter c = meters.find(name).tags(tags).counter();
    return c == null ? 0 : c.count();
  }

  static void assertTooManyRequests(HttpResponse<byte[]> response) {
    assertThat(response.statusCode()).as(describe(response)).isEqualTo(429);
    assertThat(errorCode(response)).isEqualTo("TOOMANYREQUESTS");
    assertThat(response.headers().firstValue("Retry-After"))
        .as("Retry-After, in seconds")
        .isPresent();
    assertThat(Long.parseLong(response.headers().firstValue("Retry-After").get()))
        .isBetween(1L, 60L);
  }

  @Test
  @Order(1)
  void anIdentityOverItsRequestsPerSecondGets429WithRetryAfterWhileAnotherIsServed()
      throws Exception {
    String path = blob("rl/rate", "rate limited blob");
    assertThat(get(path, BOB).statusCode()).isEqualTo(200);
    double before = counter("registry.cache.rate.limited", "identity", "user", "limit", "requests");
    // 30 at once: well over bob's burst of 10 however slow the machine is
    List<CompletableFuture<HttpResponse<byte[]>>> burst = new ArrayList<>();
    for (int i = 0; i < 30; i++) {
      burst.add(getAsync(path, BOB));
    }
    List<HttpResponse<byte[]>> answers = new ArrayList<>();
    for (CompletableFuture<HttpResponse<byte[]>> f : burst) {
      answers.add(f.get(60, TimeUnit.SECONDS));
    }
    List<HttpResponse<byte[]>> refused =
        answers.stream().filter(r -> r.statusCode() == 429).toList();
    assertThat(refused).as("bob's requests over his burst").isNotEmpty();
    assertThat(answers).allSatisfy(r -> assertThat(r.statusCode()).as(describe(r)).isIn(200, 429));
    refused.forEach(RateLimitIT::assertTooManyRequests);

    HttpResponse<byte[]> alice = get(path, ALICE);
    assertThat(alice.statusCode())
        .as("another identity is still served: " + describe(alice))
        .isEqualTo(200);
    assertThat(new String(alice.body(), StandardCharsets.UTF_8)).isEqualTo("rate limited blob");
    assertThat(
            counter("registry.cache.rate.limited", "identity", "user", "limit", "requests")
                - before)
        .isEqualTo(refused.size());
  }

  @Test
  @Order(2)
  void aSecondFillOfTheSameIdentityWaitsForTheFirstWhileJoinersAndOthersAreServed()
      throws Exception {
    byte[] slowBytes = "a blob the upstream holds back".getBytes(StandardCharsets.UTF_8);
    String slowDigest = Sha256.digest(slowBytes);
    String slow = "/v2/rl/fills/blobs/" + slowDigest;
    CountDownLatch gate = new CountDownLatch(1);
    upstream.route(
        slow,
        ex -> {
          try {
            gate.await(30, TimeUnit.SECONDS);
          } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
          }
          ScriptedHttp.send(ex, 200, "application/octet-stream", slowBytes, slowDigest);
        });
    String other = blob("rl/fills", "another blob");
    String manifest = "/v2/rl/fills/manifests/v1";
    byte[] manifestBytes =
        ("{\"schemaVersion\":2,\"mediaType\":\"application/vnd.oci.image.manifest.v1+json\","
                + "\"config\":{\"mediaType\":\"application/vnd.oci.image.config.v1+json\",\"digest\":\""
                + slowDigest
                + "\",\"size\":"
                + slowBytes.length
                + "},\"layers\":[]}")
            .getBytes(StandardCharsets.UTF_8);
    upstream.route(
        manifest,
        ex ->
            ScriptedHttp.send(
                ex,
                200,
                "application/vnd.oci.image.manifest.v1+json",
                manifestBytes,
                Sha256.digest(manifestBytes)));

    CompletableFuture<HttpResponse<byte[]>> first = getAsync(slow, CI);
    await().atMost(Duration.ofSeconds(20)).until(() -> upstream.count("GET", slow) == 1);
    double before =
        counter("registry.cache.rate.limited", "identity", "robot:ci", "limit", "fills");

    // the robot's second fill, a blob or a manifest, is refused and never reaches the upstream
    assertTooManyRequests(get(other, CI));
    assertThat(get(other, CI).headers().firstValue("Retry-After")).hasValue("1");
    assertTooManyRequests(
        cache.get(manifest, "Authorization", CI, "Accept", CacheClient.MANIFEST_ACCEPT));
    assertThat(upstream.count(other)).isZero();
    assertThat(upstream.count(manifest)).isZero();
    assertThat(
            counter("registry.cache.rate.limited", "identity", "robot:ci", "limit", "fills")
                - before)
        .isEqualTo(3);

    // joining the fill running takes no permit; another identity has its own
    PullActivity.Snapshot running = activity.snapshot();
    CompletableFuture<HttpResponse<byte[]>> joiner = getAsync(slow, CI);
    await()
        .atMost(Duration.ofSeconds(20))
        .until(() -> activity.snapshot().started() > running.started());
    HttpResponse<byte[]> alice = get(other, ALICE);
    assertThat(alice.statusCode()).as(describe(alice)).isEqualTo(200);
    assertThat(joiner).as("the joiner waits on the fill, it is not refused").isNotDone();

    gate.countDown();
    for (CompletableFuture<HttpResponse<byte[]>> f : List.of(first, joiner)) {
      HttpResponse<byte[]> response = f.get(30, TimeUnit.SECONDS);
      assertThat(response.statusCode()).as(describe(response)).isEqualTo(200);
      assertThat(response.body()).isEqualTo(slowBytes);
    }
    assertThat(upstream.count("GET", slow)).as("one fill for both").isEqualTo(1);

    // the fill ended: its permit is back (polled gently, within the requests per second)
    await()
        .atMost(Duration.ofSeconds(20))
        .pollInterval(Duration.ofMillis(400))
        .until(
            () ->
                cache
                        .get(manifest, "Authorization", CI, "Accept", CacheClient.MANIFEST_ACCEPT)
                        .statusCode()
                    == 200);
    assertThat(upstream.count("GET", manifest)).isEqualTo(1);
    assertThat(get(other, CI).statusCode()).as("a hit needs no permit").isEqualTo(200);
  }

  @Test
  @Order(3)
  void theAccessLogAndTheMetricsNameIdentitiesNeverSecretsAndOnlyRobotsByName(
      CapturedOutput output) {
    String path = blob("rl/log", "logged blob");
    assertThat(get(path, ALICE).statusCode()).isEqualTo(200);
    // the client has its last byte before the store's commit: a request before that joins the
    // fill (cache=miss), one after it is served from the store (cache=hit, checked below)
    ManualCache.awaitDownloadsCommitted(context);
    assertThat(get(path, CI).statusCode()).isEqualTo(200);
    // refused before any check (so the failed-check test after this one has all its tries)
    assertThat(get(path, "Basic !not-base64!").statusCode()).isEqualTo(401);

    await()
        .atMost(Duration.ofSeconds(10))
        .untilAsserted(
            () -> {
              assertThat(output.getOut())
                  .containsPattern(
                      "method=GET path="
                          + path
                          + " status=200 bytes=\\S+ duration_ms=\\d+ cache=miss upstream=local identity=user:alice");
              assertThat(output.getOut())
                  .containsPattern(
                      "method=GET path="
                          + path
                          + " status=200 bytes=\\S+ duration_ms=\\d+ cache=hit upstream=local identity=robot:ci");
              assertThat(output.getOut())
                  .containsPattern("method=GET path=" + path + " status=401 .* identity=-");
            });
    String all = output.getAll();
    for (String secret :
        List.of("s3cret", "hunter2", ROBOT_TOKEN, ALICE.substring(6), CI.substring(6))) {
      assertThat(all).as("the log shows no password, token or credentials").doesNotContain(secret);
    }

    Set<String> identities =
        meters.find("registry.cache.identity.requests").counters().stream()
            .map(c -> c.getId().getTag("identity"))
            .collect(Collectors.toSet());
    assertThat(identities).contains("robot:ci", "user").isSubsetOf("robot:ci", "user", "anonymous");
    Set<String> limited =
        meters.find("registry.cache.rate.limited").counters().stream()
            .map(c -> c.getId().getTag("identity"))
            .collect(Collectors.toSet());
    assertThat(limited).isSubsetOf("robot:ci", "user", "anonymous", "unauthenticated");
  }

  @Test
  @Order(4)
  void anAddressThatFailedTooManyChecksGets429BeforeAnyCheck() {
    String path = blob("rl/guess", "guarded blob");
    for (int i = 0; i < 3; i++) {
      HttpResponse<byte[]> wrong = get(path, basic("alice", "guess-" + i));
      assertThat(wrong.statusCode()).as(describe(wrong)).isEqualTo(401);
      assertThat(errorCode(wrong)).isEqualTo("UNAUTHORIZED");
    }
    HttpResponse<byte[]> refused = get(path, basic("alice", "guess-3"));
    assertTooManyRequests(refused);
    assertThat(Long.parseLong(refused.headers().firstValue("Retry-After").get()))
        .as("one try comes back every 20 s")
        .isBetween(15L, 20L);
    assertThat(errorCode(get("/v2/token?service=registry-cache", basic("bob", "guess-4"))))
        .as("the token endpoint is off here; /v2/token is a repository path, refused all the same")
        .isEqualTo("TOOMANYREQUESTS");
    assertThat(
            counter(
                "registry.cache.rate.limited",
                "identity",
                "unauthenticated",
                "limit",
                "failed-checks"))
        .isEqualTo(2);
    assertThat(upstream.count(path)).as("nothing reached the upstream").isZero();
  }
}
