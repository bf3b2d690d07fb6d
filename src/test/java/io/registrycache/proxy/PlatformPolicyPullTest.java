package io.registrycache.proxy;

import static io.registrycache.testsupport.CacheClient.describe;
import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import com.jayway.jsonpath.JsonPath;
import io.micrometer.core.instrument.MeterRegistry;
import io.registrycache.RegistryCacheApplication;
import io.registrycache.admin.PreloadJob;
import io.registrycache.admin.PreloadPlatforms;
import io.registrycache.admin.Preloader;
import io.registrycache.testsupport.CacheClient;
import io.registrycache.testsupport.CacheProperties;
import io.registrycache.testsupport.ScriptedHttp;
import io.registrycache.testsupport.Sha256;
import io.registrycache.testsupport.TestFiles;
import io.registrycache.testsupport.TestImages;
import io.registrycache.testsupport.TestImages.Blob;
import io.registrycache.testsupport.TestImages.Image;
import io.registrycache.testsupport.TestImages.ImageIndex;
import io.registrycache.testsupport.TestImages.Manifest;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import java.util.function.BooleanSupplier;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.springframework.beans.factory.annotation.Autowired;
import org.springframework.boot.test.context.SpringBootTest;
import org.springframework.boot.test.web.server.LocalServerPort;
import org.springframework.test.context.DynamicPropertyRegistry;
import org.springframework.test.context.DynamicPropertySource;

/**
 * The platform policy over real HTTP, the service as it runs, an upstream scripted with a delay per
 * answer ({@link ScriptedHttp}; far enough away that prefetch on manifest is on): repositories
 * {@code it/policy/**} allow {@code linux/amd64} only; everything else has no rule.
 */
@SpringBootTest(
    classes = RegistryCacheApplication.class,
    webEnvironment = SpringBootTest.WebEnvironment.RANDOM_PORT)
class PlatformPolicyPullTest {

  static final ScriptedHttp upstream = new ScriptedHttp();
  static final Path storage = TestFiles.tempDirectory("registry-cache-policy-");
  static final Duration DELAY = Duration.ofMillis(40);
  static final Duration WAIT = Duration.ofSeconds(20);

  @LocalServerPort int port;
  @Autowired MeterRegistry meters;
  @Autowired Preloader preloader;
  CacheClient cache;

  @DynamicPropertySource
  static void properties(DynamicPropertyRegistry registry) {
    CacheProperties.cache(storage)
        .localUpstream(upstream::baseUrl)
        .upstream("retry.max-attempts", "1")
        .upstream("circuit-breaker.enabled", "false")
        .set("registry-cache.blobs.prefetch.platforms", "linux/arm64")
        .set("registry-cache.policy.rules[0].repositories", "it/policy/**")
        .set("registry-cache.policy.rules[0].platforms", "linux/amd64")
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

  /** Serves {@code index} by tag and each platform's manifest and blobs by digest. */
  private static void serve(ImageIndex index) {
    route("/v2/" + index.repository() + "/manifests/" + index.tag(), index.index());
    for (TestImages.PlatformImage p : index.platforms()) {
      serve(index.repository(), p.image());
    }
  }

  /** Serves {@code image} of {@code repository} by its tag and digest, and its blobs. */
  private static void serve(String repository, Image image) {
    route("/v2/" + repository + "/manifests/" + image.tag(), image.manifest());
    route("/v2/" + repository + "/manifests/" + image.manifest().digest(), image.manifest());
    for (Blob blob : image.blobs()) {
      upstream.route(
          "/v2/" + repository + "/blobs/" + blob.digest(),
          ex -> {
            pause();
            ScriptedHttp.send(ex, 200, "application/octet-stream", blob.bytes(), blob.digest());
          });
    }
  }

  private static void route(String path, Manifest manifest) {
    upstream.route(
        path,
        ex -> {
          pause();
          ScriptedHttp.send(ex, 200, manifest.mediaType(), manifest.bytes(), manifest.digest());
        });
  }

  private static void pause() {
    try {
      Thread.sleep(DELAY.toMillis());
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    }
  }

  private static long manifestGets(String repository, Image image) {
    return upstream.count("GET", "/v2/" + repository + "/manifests/" + image.manifest().digest());
  }

  private static long blobGets(String repository, Blob blob) {
    return upstream.count("GET", "/v2/" + repository + "/blobs/" + blob.digest());
  }

  private static boolean eventually(BooleanSupplier condition) {
    await().atMost(WAIT).until(condition::getAsBoolean);
    return true;
  }

  /** Whether {@code condition} holds all through five upstream round trips. */
  private static boolean throughout(BooleanSupplier condition) {
    await().during(DELAY.multipliedBy(5)).atMost(WAIT).until(condition::getAsBoolean);
    return true;
  }

  private double verdicts(String verdict) {
    var c =
        meters
            .find("registry.cache.policy.verdicts")
            .tags("policy", "platform", "verdict", verdict)
            .counter();
    return c == null ? 0 : c.count();
  }

  private static void assertDenied(HttpResponse<byte[]> response, String platform) {
    assertThat(response.statusCode()).as(describe(response)).isEqualTo(403);
    String body = new String(response.body(), StandardCharsets.UTF_8);
    assertThat(JsonPath.<String>read(body, "$.errors[0].code")).isEqualTo("DENIED");
    assertThat(JsonPath.<String>read(body, "$.errors[0].message"))
        .contains("platform " + platform + " of ")
        .endsWith("is not allowed by policy platforms=[linux/amd64]");
  }

  @Test
  void anIndexIsServedAsItIsItsAllowedChildPullsAndTheOtherIsRefusedWithoutAnUpstreamRequest() {
    ImageIndex index = TestImages.index(TestImages.uniqueRepository("policy/index"), "v1");
    String repo = index.repository();
    serve(index);
    Image amd64 = index.platform("amd64").image();
    Image arm64 = index.platform("arm64").image();
    double denied = verdicts("denied");

    HttpResponse<byte[]> top = cache.getManifest("/v2/" + repo + "/manifests/v1");
    assertThat(top.statusCode()).as(describe(top)).isEqualTo(200);
    assertThat(top.body()).as("the index, byte for byte").isEqualTo(index.index().bytes());
    assertThat(top.headers().firstValue("Docker-Content-Digest")).contains(index.index().digest());

    HttpResponse<byte[]> allowed =
        cache.getManifest("/v2/" + repo + "/manifests/" + amd64.manifest().digest());
    assertThat(allowed.statusCode()).as(describe(allowed)).isEqualTo(200);
    assertThat(Sha256.digest(allowed.body())).isEqualTo(amd64.manifest().digest());
    // Its layers, left out of blobs.prefetch.platforms, are prefetched once a client asks for it
    // and the policy has allowed it.
    assertThat(eventually(() -> amd64.blobs().stream().allMatch(b -> blobGets(repo, b) == 1)))
        .isTrue();
    for (Blob blob : amd64.blobs()) {
      HttpResponse<byte[]> got = cache.get("/v2/" + repo + "/blobs/" + blob.digest());
      assertThat(got.statusCode()).as(describe(got)).isEqualTo(200);
      assertThat(Sha256.digest(got.body())).isEqualTo(blob.digest());
      assertThat(blobGets(repo, blob)).isEqualTo(1);
    }

    assertDenied(
        cache.getManifest("/v2/" + repo + "/manifests/" + arm64.manifest().digest()),
        "linux/arm64");
    HttpResponse<byte[]> head =
        cache.headManifest("/v2/" + repo + "/manifests/" + arm64.manifest().digest());
    assertThat(head.statusCode()).as(describe(head)).isEqualTo(403);
    assertThat(verdicts("denied") - denied).isEqualTo(2);
    // Neither the client's requests nor the index's prefetch (blobs.prefetch.platforms names
    // linux/arm64) asked the upstream for the refused manifest or its layers.
    assertThat(
            throughout(
                () ->
                    manifestGets(repo, arm64) == 0
                        && upstream.count(
                                "HEAD", "/v2/" + repo + "/manifests/" + arm64.manifest().digest())
                            == 0
                        && arm64.layers().stream().allMatch(b -> blobGets(repo, b) == 0)))
        .isTrue();
    assertThat(manifestGets(repo, amd64)).isEqualTo(1);

    // A blob by digest is served as without a policy, whichever manifest names it.
    HttpResponse<byte[]> config = cache.get("/v2/" + repo + "/blobs/" + arm64.config().digest());
    assertThat(config.statusCode()).as(describe(config)).isEqualTo(200);
    assertThat(Sha256.digest(config.body())).isEqualTo(arm64.config().digest());
  }

  @Test
  void aSinglePlatformImageIsJudgedByItsConfigAndARefusedOnesLayersAreNeverFetched() {
    String repo = TestImages.uniqueRepository("policy/single");
    Image s390x = TestImages.smallOci(repo, "s390x", "linux", "s390x");
    Image amd64 = TestImages.smallOci(repo, "amd64", "linux", "amd64");
    serve(repo, s390x);
    serve(repo, amd64);

    assertDenied(cache.getManifest("/v2/" + repo + "/manifests/s390x"), "linux/s390x");
    assertThat(blobGets(repo, s390x.config())).as("its config told its platform").isEqualTo(1);
    assertThat(throughout(() -> s390x.layers().stream().allMatch(b -> blobGets(repo, b) == 0)))
        .isTrue();
    // Known now: refused by digest without asking the upstream again.
    long gets = upstream.count("/v2/" + repo + "/manifests/" + s390x.manifest().digest());
    assertDenied(
        cache.getManifest("/v2/" + repo + "/manifests/" + s390x.manifest().digest()),
        "linux/s390x");
    assertThat(upstream.count("/v2/" + repo + "/manifests/" + s390x.manifest().digest()))
        .isEqualTo(gets);

    HttpResponse<byte[]> allowed = cache.getManifest("/v2/" + repo + "/manifests/amd64");
    assertThat(allowed.statusCode()).as(describe(allowed)).isEqualTo(200);
    assertThat(allowed.body()).isEqualTo(amd64.manifest().bytes());
    // its layers' prefetch waited for the verdict, and then ran
    assertThat(eventually(() -> amd64.blobs().stream().allMatch(b -> blobGets(repo, b) == 1)))
        .isTrue();
  }

  @Test
  void anImageWhoseConfigTheUpstreamLacksIsUnknownNotServedAndAskedAgainNextTime() {
    String repo = TestImages.uniqueRepository("policy/no-config");
    Image image = TestImages.smallOci(repo, "v1", "linux", "amd64");
    route("/v2/" + repo + "/manifests/v1", image.manifest());
    route("/v2/" + repo + "/manifests/" + image.manifest().digest(), image.manifest());

    for (int attempt = 1; attempt <= 2; attempt++) {
      HttpResponse<byte[]> got = cache.getManifest("/v2/" + repo + "/manifests/v1");
      assertThat(got.statusCode()).as(describe(got)).isEqualTo(404);
      String body = new String(got.body(), StandardCharsets.UTF_8);
      assertThat(JsonPath.<String>read(body, "$.errors[0].code")).isEqualTo("MANIFEST_UNKNOWN");
      assertThat(JsonPath.<String>read(body, "$.errors[0].message"))
          .contains("its image config " + image.config().digest() + " is not to be had")
          .contains("cannot tell its platform");
      assertThat(blobGets(repo, image.config())).isEqualTo(attempt);
    }
  }

  @Test
  void aRepositoryNoRuleMatchesServesEveryPlatform() {
    ImageIndex index = TestImages.index(TestImages.uniqueRepository("open"), "v1");
    serve(index);
    Image arm64 = index.platform("arm64").image();

    assertThat(cache.getManifest("/v2/" + index.repository() + "/manifests/v1").statusCode())
        .isEqualTo(200);
    HttpResponse<byte[]> child =
        cache.getManifest("/v2/" + index.repository() + "/manifests/" + arm64.manifest().digest());
    assertThat(child.statusCode()).as(describe(child)).isEqualTo(200);
    assertThat(child.body()).isEqualTo(arm64.manifest().bytes());
  }

  @Test
  void preloadTakesOnlyThePlatformsThePolicyAllows() {
    ImageIndex index = TestImages.index(TestImages.uniqueRepository("policy/preload"), "v1");
    String repo = index.repository();
    serve(index);
    Image amd64 = index.platform("amd64").image();
    Image arm64 = index.platform("arm64").image();

    PreloadJob job =
        preloader.submit(
            List.of(CacheProperties.UPSTREAM_HOST + "/" + repo + ":v1"),
            PreloadPlatforms.of(List.of("linux/amd64", "linux/arm64")),
            "test");
    assertThat(eventually(() -> job.state() == PreloadJob.State.DONE)).isTrue();

    assertThat(job.items().getFirst().state())
        .as(String.valueOf(job.items().getFirst().error()))
        .isEqualTo(PreloadJob.ItemState.DONE);
    assertThat(manifestGets(repo, amd64)).isEqualTo(1);
    assertThat(amd64.blobs().stream().allMatch(b -> blobGets(repo, b) == 1)).isTrue();
    assertThat(manifestGets(repo, arm64)).isZero();
    assertThat(arm64.blobs().stream().allMatch(b -> blobGets(repo, b) == 0)).isTrue();
  }
}
