package io.registrycache.proxy;

import static io.registrycache.testsupport.CacheClient.describe;
import static io.registrycache.testsupport.CacheClient.errorCode;
import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import io.registrycache.it.AbstractCacheIT;
import io.registrycache.testsupport.CacheClient;
import io.registrycache.testsupport.CacheProperties;
import io.registrycache.testsupport.ManualCache;
import io.registrycache.testsupport.TestImages;
import io.registrycache.testsupport.TestImages.Artifact;
import io.registrycache.testsupport.TestImages.Image;
import io.registrycache.testsupport.UpstreamRegistryContainer;
import java.net.URLEncoder;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;
import org.junit.jupiter.api.io.TempDir;
import org.springframework.boot.test.system.CapturedOutput;
import org.springframework.boot.test.system.OutputCaptureExtension;
import tools.jackson.databind.JsonNode;
import tools.jackson.databind.json.JsonMapper;

/**
 * The referrers API through the cache in front of {@code registry:2} (distribution 2.8), which has
 * no referrers API: the list comes from the referrers tag schema ({@code sha256-<hex>} index),
 * pushed as oras and cosign push it. Listed, filtered and paged in all three request forms, and
 * again with the upstream stopped.
 */
@ExtendWith(OutputCaptureExtension.class)
class ReferrersIT {

  static final String HOST = "upstream.test";
  static final String SIGNATURE = "application/vnd.dev.cosign.artifact.sig.v1+json";
  static final String SBOM = "application/spdx+json";
  static final JsonMapper JSON = JsonMapper.builder().build();

  static final UpstreamRegistryContainer upstream = new UpstreamRegistryContainer();

  @TempDir static Path storage;

  @BeforeAll
  static void startUpstream() {
    upstream.start();
  }

  @AfterAll
  static void stopUpstream() {
    upstream.stop();
  }

  /** Page size 1 and every TTL 0: every request goes to the upstream while it is up. */
  static ManualCache startCache() {
    return ManualCache.start(
        CacheProperties.cache(storage)
            .set("registry-cache.default-upstream", "local")
            .set("registry-cache.upstreams.local.host", HOST)
            .set("registry-cache.upstreams.local.url", upstream.baseUrl())
            .set("registry-cache.manifests.tag-ttl", "0s")
            .set("registry-cache.referrers.ttl", "0s")
            .set("registry-cache.referrers.page-size", "1")
            .set("registry-cache.access-log.enabled", "true"));
  }

  @Test
  void listsFiltersAndPagesFromTheTagSchemaInEveryFormAndWithTheUpstreamStopped(
      CapturedOutput output) throws Exception {
    String repo = TestImages.uniqueRepository("referrers");
    Image image = upstream.pusher().push(TestImages.smallOci(repo, "v1"));
    Artifact signature =
        upstream.pusher().push(repo, TestImages.artifact(SIGNATURE, image.manifest(), "signature"));
    Artifact sbom =
        upstream.pusher().push(repo, TestImages.artifact(SBOM, image.manifest(), "sbom"));
    upstream.pusher().pushReferrersTag(repo, image.manifest().digest(), List.of(signature, sbom));
    String subject = image.manifest().digest();
    List<String> forms =
        List.of(
            "/v2/" + repo + "/referrers/" + subject,
            "/v2/" + HOST + "/" + repo + "/referrers/" + subject,
            "/v2/" + repo + "/referrers/" + subject + "?ns=" + HOST);

    try (ManualCache running = startCache()) {
      CacheClient cache = running.client().withTimeout(Duration.ofSeconds(20));
      long cold = System.nanoTime();
      HttpResponse<byte[]> first = cache.get(forms.get(0));
      long coldMs = (System.nanoTime() - cold) / 1_000_000;
      long warm = System.nanoTime();
      cache.get(forms.get(0));
      System.out.printf(
          "referrers via tag schema (registry:2, ttl 0): cold %d ms, warm %d ms%n",
          coldMs, (System.nanoTime() - warm) / 1_000_000);
      assertThat(first.statusCode()).as(describe(first)).isEqualTo(200);

      for (String form : forms) {
        assertThat(allPages(cache, form))
            .as(form)
            .containsExactlyInAnyOrder(signature.manifest().digest(), sbom.manifest().digest());
        HttpResponse<byte[]> filtered =
            cache.get(
                withQuery(form, "artifactType=" + URLEncoder.encode(SBOM, StandardCharsets.UTF_8)));
        assertThat(filtered.statusCode()).as(describe(filtered)).isEqualTo(200);
        assertThat(filtered.headers().firstValue("OCI-Filters-Applied")).hasValue("artifactType");
        JsonNode index = JSON.readTree(filtered.body());
        assertThat(index.path("manifests")).hasSize(1);
        JsonNode d = index.path("manifests").get(0);
        assertThat(d.path("digest").asString()).isEqualTo(sbom.manifest().digest());
        assertThat(d.path("artifactType").asString()).isEqualTo(SBOM);
        assertThat(d.path("annotations").path("io.registrycache.test.note").asString())
            .isEqualTo(sbom.annotation());
        assertThat(filtered.headers().firstValue("Link")).isEmpty();
      }

      // The referrer manifests and their blobs pull through, subject byte-exact.
      HttpResponse<byte[]> sig =
          cache.getManifest("/v2/" + repo + "/manifests/" + signature.manifest().digest());
      assertThat(sig.body()).isEqualTo(signature.manifest().bytes());
      for (TestImages.Blob blob : signature.blobs()) {
        assertThat(cache.get("/v2/" + repo + "/blobs/" + blob.digest()).body())
            .isEqualTo(blob.bytes());
      }

      HttpResponse<byte[]> head = cache.head(forms.get(2));
      assertThat(head.statusCode()).as(describe(head)).isEqualTo(200);
      assertThat(head.headers().firstValue("Content-Type")).hasValue(TestImages.OCI_INDEX);
      assertThat(head.headers().firstValue("OCI-Namespace")).hasValue(HOST);
      assertThat(head.body()).isEmpty();

      // None: an empty index, never a 404.
      HttpResponse<byte[]> none =
          cache.get("/v2/" + repo + "/referrers/" + TestImages.unknownDigest());
      assertThat(none.statusCode()).as(describe(none)).isEqualTo(200);
      assertThat(none.headers().firstValue("Content-Type")).hasValue(TestImages.OCI_INDEX);
      assertThat(JSON.readTree(none.body()).path("manifests")).isEmpty();

      HttpResponse<byte[]> bad = cache.get("/v2/" + repo + "/referrers/sha256:nothex");
      assertThat(bad.statusCode()).isEqualTo(400);
      assertThat(errorCode(bad)).isEqualTo("DIGEST_INVALID");

      assertThat(output.getOut())
          .containsPattern(
              "method=GET path=/v2/"
                  + repo
                  + "/referrers/"
                  + subject
                  + " status=200 bytes=\\d+ duration_ms=\\d+ cache=\\w+ upstream=local kind=referrers");

      upstream.stopUpstream();
      try {
        for (String form : forms) {
          assertThat(allPages(cache, form))
              .as("upstream stopped: " + form)
              .containsExactlyInAnyOrder(signature.manifest().digest(), sbom.manifest().digest());
        }
      } finally {
        upstream.startUpstream();
      }
    }
  }

  @Test
  void preloadWithIncludeReferrersKeepsSignaturesForOfflineUse() throws Exception {
    String repo = TestImages.uniqueRepository("referrers-preload");
    Image image = upstream.pusher().push(TestImages.smallOci(repo, "v1"));
    Artifact signature =
        upstream.pusher().push(repo, TestImages.artifact(SIGNATURE, image.manifest(), "signature"));
    upstream.pusher().pushReferrersTag(repo, image.manifest().digest(), List.of(signature));
    Path file = storage.resolveSibling(storage.getFileName() + "-preload.txt");
    Files.writeString(file, HOST + "/" + repo + ":v1\n");
    Path stored = AbstractCacheIT.blobFile(storage, signature.blobs().get(1).digest());
    try (ManualCache online =
        ManualCache.start(
            CacheProperties.cache(storage)
                .set("registry-cache.default-upstream", "local")
                .set("registry-cache.upstreams.local.host", HOST)
                .set("registry-cache.upstreams.local.url", upstream.baseUrl())
                .set("registry-cache.preload.file", file)
                .set("registry-cache.preload.include-referrers", "true"))) {
      await()
          .atMost(Duration.ofSeconds(60))
          .pollInterval(Duration.ofMillis(200))
          .untilAsserted(
              () -> assertThat(stored).as("the signature's payload blob, preloaded").exists());
    }
    try (ManualCache offline =
        ManualCache.start(
            CacheProperties.cache(storage)
                .set("registry-cache.default-upstream", "local")
                .set("registry-cache.upstreams.local.host", HOST)
                .set("registry-cache.upstreams.local.url", upstream.baseUrl())
                .set("registry-cache.offline", "true"))) {
      CacheClient cache = offline.client();
      assertThat(allPages(cache, "/v2/" + repo + "/referrers/" + image.manifest().digest()))
          .containsExactly(signature.manifest().digest());
      assertThat(
              cache
                  .getManifest("/v2/" + repo + "/manifests/" + signature.manifest().digest())
                  .body())
          .isEqualTo(signature.manifest().bytes());
      for (TestImages.Blob blob : signature.blobs()) {
        assertThat(cache.get("/v2/" + repo + "/blobs/" + blob.digest()).body())
            .isEqualTo(blob.bytes());
      }
    }
  }

  /**
   * Follows {@code Link: rel="next"} (page size 1: one descriptor per page); the digests listed.
   */
  static List<String> allPages(CacheClient cache, String path) throws Exception {
    List<String> digests = new ArrayList<>();
    String next = path;
    for (int pages = 0; next != null && pages < 10; pages++) {
      HttpResponse<byte[]> response = cache.get(next);
      assertThat(response.statusCode()).as(describe(response)).isEqualTo(200);
      assertThat(response.headers().firstValue("Content-Type")).hasValue(TestImages.OCI_INDEX);
      JsonNode index = JSON.readTree(response.body());
      assertThat(index.path("mediaType").asString()).isEqualTo(TestImages.OCI_INDEX);
      assertThat(index.path("manifests").size()).isLessThanOrEqualTo(1);
      index.path("manifests").forEach(d -> digests.add(d.path("digest").asString()));
      next =
          response
              .headers()
              .firstValue("Link")
              .map(link -> link.substring(link.indexOf('<') + 1, link.indexOf('>')))
              .orElse(null);
    }
    return digests;
  }

  static String withQuery(String path, String query) {
    return path + (path.contains("?") ? "&" : "?") + query;
  }
}
