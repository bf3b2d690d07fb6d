package io.registrycache.proxy;

import static io.registrycache.testsupport.CacheClient.describe;
import static io.registrycache.testsupport.CacheClient.errorCode;
import static org.assertj.core.api.Assertions.assertThat;

import io.registrycache.testsupport.CacheClient;
import io.registrycache.testsupport.CacheProperties;
import io.registrycache.testsupport.ManualCache;
import io.registrycache.testsupport.TestImages;
import io.registrycache.testsupport.TestImages.Blob;
import io.registrycache.testsupport.TestImages.Image;
import io.registrycache.testsupport.UpstreamRegistryContainer;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.time.Duration;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * Air-gapped mode ({@code registry-cache.offline=true}): the upstream is never contacted, even
 * though it is up; what is cached is served (tags without revalidation), the rest is {@code
 * MANIFEST_UNKNOWN} / {@code BLOB_UNKNOWN}.
 */
class OfflineModeIT {

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

  static ManualCache startCache(boolean offline) {
    return ManualCache.start(
        CacheProperties.cache(storage)
            .localUpstream(upstream::baseUrl)
            .set("registry-cache.manifests.tag-ttl", "0s")
            .set("registry-cache.offline", offline));
  }

  @Test
  void servesWhatIsCachedAndNeverContactsTheUpstream() {
    Image cached =
        upstream.pusher().push(TestImages.smallOci(TestImages.uniqueRepository("offline"), "v1"));
    Image notCached =
        upstream
            .pusher()
            .push(TestImages.smallOci(TestImages.uniqueRepository("offline-not"), "v1"));
    String manifestPath = "/v2/" + cached.repository() + "/manifests/v1";
    try (ManualCache online = startCache(false)) {
      CacheClient cache = online.client().withTimeout(Duration.ofSeconds(20));
      assertThat(cache.getManifest(manifestPath).statusCode()).isEqualTo(200);
      for (Blob blob : cached.blobs()) {
        assertThat(cache.get("/v2/" + cached.repository() + "/blobs/" + blob.digest()).statusCode())
            .isEqualTo(200);
      }
    }
    upstream.syncLogs();
    long before = upstream.requests().size();

    try (ManualCache offline = startCache(true)) {
      CacheClient cache = offline.client().withTimeout(Duration.ofSeconds(20));
      // tag-ttl is 0: online, this tag would be revalidated on every pull.
      HttpResponse<byte[]> manifest = cache.getManifest(manifestPath);
      assertThat(manifest.statusCode()).as(describe(manifest)).isEqualTo(200);
      assertThat(manifest.body()).isEqualTo(cached.manifest().bytes());
      for (Blob blob : cached.blobs()) {
        HttpResponse<byte[]> response =
            cache.get("/v2/" + cached.repository() + "/blobs/" + blob.digest());
        assertThat(response.body()).isEqualTo(blob.bytes());
      }
      HttpResponse<byte[]> tags = cache.get("/v2/" + cached.repository() + "/tags/list");
      assertThat(tags.statusCode()).isEqualTo(200);
      assertThat(new String(tags.body(), StandardCharsets.UTF_8)).contains("\"v1\"");

      HttpResponse<byte[]> missingManifest =
          cache.getManifest("/v2/" + notCached.repository() + "/manifests/v1");
      assertThat(missingManifest.statusCode()).as(describe(missingManifest)).isEqualTo(404);
      assertThat(errorCode(missingManifest)).isEqualTo("MANIFEST_UNKNOWN");
      HttpResponse<byte[]> missingBlob =
          cache.get(
              "/v2/" + notCached.repository() + "/blobs/" + notCached.layers().get(0).digest());
      assertThat(missingBlob.statusCode()).as(describe(missingBlob)).isEqualTo(404);
      assertThat(errorCode(missingBlob)).isEqualTo("BLOB_UNKNOWN");
    }
    upstream.syncLogs();
    // Only syncLogs' own marker request reached the upstream while offline.
    assertThat(upstream.requests().stream().skip(before).filter(r -> !r.path().equals("/v2/")))
        .isEmpty();
  }
}
