package io.registrycache.api;

import static io.registrycache.testsupport.CacheClient.describe;
import static io.registrycache.testsupport.CacheClient.errorCode;
import static io.registrycache.testsupport.CacheClient.errorMessage;
import static org.assertj.core.api.Assertions.assertThat;

import io.registrycache.it.AbstractCacheIT;
import io.registrycache.testsupport.CacheClient;
import io.registrycache.testsupport.TestImages;
import io.registrycache.testsupport.TestImages.Image;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.util.stream.Stream;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.Arguments;
import org.junit.jupiter.params.provider.MethodSource;
import org.springframework.boot.test.web.server.LocalManagementPort;

/**
 * Status codes and OCI error bodies: 404s, bad input, push methods, unconfigured hosts; and the
 * service keeps serving after each of them.
 */
class ErrorMappingIT extends AbstractCacheIT {

  static final String SHA =
      "sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";

  static Image known;

  @LocalManagementPort int managementPort;

  @BeforeEach
  void pushKnownImage() {
    if (known == null) {
      known = upstream.pusher().push(TestImages.smallOci(TestImages.uniqueRepository("err"), "v1"));
    }
  }

  @Test
  void baseEndpointAnswers() {
    HttpResponse<byte[]> get = cache.get("/v2/");
    assertThat(get.statusCode()).as(describe(get)).isEqualTo(200);
    HttpResponse<byte[]> head = cache.head("/v2/");
    assertThat(head.statusCode()).isEqualTo(200);
    assertThat(head.body()).isEmpty();
  }

  @Test
  void unknownTagIs404ManifestUnknown() {
    HttpResponse<byte[]> response =
        cache.getManifest("/v2/" + known.repository() + "/manifests/no-such-tag");
    assertThat(response.statusCode()).as(describe(response)).isEqualTo(404);
    assertThat(errorCode(response)).isEqualTo("MANIFEST_UNKNOWN");
    HttpResponse<byte[]> head =
        cache.headManifest("/v2/" + known.repository() + "/manifests/no-such-tag");
    assertThat(head.statusCode()).isEqualTo(404);
    assertThat(head.body()).isEmpty();
    assertStillServing();
  }

  @Test
  void unknownManifestDigestIs404ManifestUnknown() {
    HttpResponse<byte[]> response =
        cache.getManifest("/v2/" + known.repository() + "/manifests/" + TestImages.unknownDigest());
    assertThat(response.statusCode()).as(describe(response)).isEqualTo(404);
    assertThat(errorCode(response)).isEqualTo("MANIFEST_UNKNOWN");
    assertStillServing();
  }

  @Test
  void unknownBlobIs404BlobUnknown() {
    String path = "/v2/" + known.repository() + "/blobs/" + TestImages.unknownDigest();
    HttpResponse<byte[]> response = cache.get(path);
    assertThat(response.statusCode()).as(describe(response)).isEqualTo(404);
    assertThat(errorCode(response)).isEqualTo("BLOB_UNKNOWN");
    HttpResponse<byte[]> head = cache.head(path);
    assertThat(head.statusCode()).isEqualTo(404);
    assertThat(head.body()).isEmpty();
    assertStillServing();
  }

  @Test
  void unknownRepositoryIs404() {
    String repo = TestImages.uniqueRepository("nothing-here");
    HttpResponse<byte[]> manifest = cache.getManifest("/v2/" + repo + "/manifests/latest");
    assertThat(manifest.statusCode()).as(describe(manifest)).isEqualTo(404);
    assertThat(errorCode(manifest)).isIn("MANIFEST_UNKNOWN", "NAME_UNKNOWN");
    HttpResponse<byte[]> blob = cache.get("/v2/" + repo + "/blobs/" + TestImages.unknownDigest());
    assertThat(blob.statusCode()).as(describe(blob)).isEqualTo(404);
    assertThat(errorCode(blob)).isIn("BLOB_UNKNOWN", "NAME_UNKNOWN");
    HttpResponse<byte[]> tags = cache.get("/v2/" + repo + "/tags/list");
    assertThat(tags.statusCode()).as(describe(tags)).isEqualTo(404);
    assertThat(errorCode(tags)).isEqualTo("NAME_UNKNOWN");
    assertStillServing();
  }

  static Stream<Arguments> badRequests() {
    String longName = "a/".repeat(130) + "b"; // 261 characters, first segment bare
    return Stream.of(
        // invalid names (bare form: the first segment has no '.', ':' and is not localhost)
        Arguments.of("GET", "/v2/foo/Bar/manifests/latest", 400, "NAME_INVALID"),
        Arguments.of("GET", "/v2/foo/-bar/manifests/latest", 400, "NAME_INVALID"),
        Arguments.of("GET", "/v2/foo/bar_/blobs/" + SHA, 400, "NAME_INVALID"),
        Arguments.of("GET", "/v2/" + longName + "/manifests/latest", 400, "NAME_INVALID"),
        Arguments.of("GET", "/v2/upstream.test/foo/a..b/manifests/latest", 400, "NAME_INVALID"),
        Arguments.of("GET", "/v2/upstream.test/Foo/manifests/latest", 400, "NAME_INVALID"),
        Arguments.of("GET", "/v2/Foo/manifests/latest?ns=upstream.test", 400, "NAME_INVALID"),
        // invalid digests
        Arguments.of("GET", "/v2/foo/bar/blobs/sha256:abc", 400, "DIGEST_INVALID"),
        Arguments.of(
            "GET", "/v2/foo/bar/blobs/md5:d41d8cd98f00b204e9800998ecf8427e", 400, "DIGEST_INVALID"),
        Arguments.of(
            "GET",
            "/v2/foo/bar/blobs/" + SHA.toUpperCase().replace("SHA256", "sha256"),
            400,
            "DIGEST_INVALID"),
        Arguments.of("GET", "/v2/foo/bar/blobs/latest", 400, "DIGEST_INVALID"),
        Arguments.of("HEAD", "/v2/foo/bar/blobs/sha256:xyz", 400, null),
        Arguments.of("GET", "/v2/foo/bar/manifests/sha256:1234", 400, "DIGEST_INVALID"),
        Arguments.of(
            "GET", "/v2/foo/bar/manifests/sha999:" + SHA.substring(7), 400, "DIGEST_INVALID"),
        // invalid tags
        Arguments.of("GET", "/v2/foo/bar/manifests/-tag", 400, "TAG_INVALID"),
        Arguments.of("GET", "/v2/foo/bar/manifests/.tag", 400, "TAG_INVALID"),
        Arguments.of("GET", "/v2/foo/bar/manifests/" + "t".repeat(129), 400, "TAG_INVALID"),
        // push, upload and delete methods
        Arguments.of("POST", "/v2/foo/bar/blobs/uploads/", 405, "UNSUPPORTED"),
        Arguments.of(
            "PATCH",
            "/v2/foo/bar/blobs/uploads/0d2f5c1e-0000-4000-8000-000000000000",
            405,
            "UNSUPPORTED"),
        Arguments.of(
            "PUT",
            "/v2/foo/bar/blobs/uploads/0d2f5c1e-0000-4000-8000-000000000000?digest=" + SHA,
            405,
            "UNSUPPORTED"),
        Arguments.of("PUT", "/v2/foo/bar/manifests/latest", 405, "UNSUPPORTED"),
        Arguments.of("DELETE", "/v2/foo/bar/manifests/" + SHA, 405, "UNSUPPORTED"),
        Arguments.of("DELETE", "/v2/foo/bar/blobs/" + SHA, 405, "UNSUPPORTED"),
        Arguments.of("POST", "/v2/upstream.test/foo/bar/blobs/uploads/", 405, "UNSUPPORTED"),
        Arguments.of("POST", "/v2/foo/bar/blobs/uploads/?ns=upstream.test", 405, "UNSUPPORTED"),
        // registry hosts that are not configured
        Arguments.of("GET", "/v2/unknown.invalid/foo/manifests/latest", 403, "DENIED"),
        Arguments.of("GET", "/v2/unknown.invalid/foo/blobs/" + SHA, 403, "DENIED"),
        Arguments.of("GET", "/v2/localhost/foo/manifests/latest", 403, "DENIED"),
        Arguments.of("GET", "/v2/localhost:1/foo/manifests/latest", 403, "DENIED"),
        Arguments.of("GET", "/v2/foo/manifests/latest?ns=unknown.invalid", 403, "DENIED"),
        Arguments.of("GET", "/v2/foo/blobs/" + SHA + "?ns=unknown.invalid", 403, "DENIED"));
  }

  @ParameterizedTest(name = "{0} {1} -> {2} {3}")
  @MethodSource("badRequests")
  void badRequestsGetTheRightStatusAndCode(String method, String path, int status, String code) {
    byte[] body =
        method.equals("PUT") || method.equals("PATCH") || method.equals("POST")
            ? "{}".getBytes(StandardCharsets.UTF_8)
            : null;
    HttpResponse<byte[]> response =
        cache.send(
            method, path, body, "Content-Type", "application/vnd.oci.image.manifest.v1+json");
    assertThat(response.statusCode()).as(describe(response)).isEqualTo(status);
    if (method.equals("HEAD")) {
      assertThat(response.body()).isEmpty();
    } else {
      assertThat(errorCode(response)).as(describe(response)).isEqualTo(code);
      assertThat(errorMessage(response)).as("error message").isNotBlank();
    }
    assertStillServing();
  }

  @Test
  void pushIsNotForwardedUpstream() {
    String repo = TestImages.uniqueRepository("nopush");
    HttpResponse<byte[]> response =
        cache.send("POST", "/v2/" + repo + "/blobs/uploads/", new byte[0]);
    assertThat(response.statusCode()).isEqualTo(405);
    upstream.syncLogs();
    assertThat(upstream.countRequestsUnder("/v2/" + repo + "/")).isZero();
  }

  @Test
  void prometheusEndpointOnTheManagementPort() {
    assertStillServing();
    CacheClient management = CacheClient.onPort(managementPort);
    HttpResponse<byte[]> response = management.get("/actuator/prometheus");
    assertThat(response.statusCode()).as(describe(response)).isEqualTo(200);
    String text = new String(response.body(), StandardCharsets.UTF_8);
    assertThat(text).contains("# TYPE").contains("jvm_").contains("registry_cache_");
    // Answers by status from ResponseStatusFilter; Spring's per-request observation is off.
    assertThat(text)
        .contains("registry_cache_responses_total{status=\"200\"}")
        .doesNotContain("http_server_requests_seconds");
    HttpResponse<byte[]> readiness = management.get("/actuator/health/readiness");
    assertThat(readiness.statusCode()).isEqualTo(200);
  }

  /** A known manifest and blob still come back right. */
  void assertStillServing() {
    HttpResponse<byte[]> manifest =
        cache.getManifest("/v2/" + known.repository() + "/manifests/v1");
    assertThat(manifest.statusCode()).as(describe(manifest)).isEqualTo(200);
    assertThat(manifest.body()).isEqualTo(known.manifest().bytes());
    HttpResponse<byte[]> blob =
        cache.get("/v2/" + known.repository() + "/blobs/" + known.config().digest());
    assertThat(blob.statusCode()).isEqualTo(200);
    assertThat(blob.body()).isEqualTo(known.config().bytes());
  }
}
