package io.registrycache.storage.s3;

import static io.registrycache.testsupport.CacheClient.describe;
import static org.assertj.core.api.Assertions.assertThat;

import io.registrycache.storage.BlobStore;
import io.registrycache.testsupport.CacheClient;
import io.registrycache.testsupport.CacheProperties;
import io.registrycache.testsupport.ManualCache;
import io.registrycache.testsupport.S3TestServer;
import io.registrycache.testsupport.Sha256;
import io.registrycache.testsupport.TestImages;
import io.registrycache.testsupport.TestImages.Blob;
import io.registrycache.testsupport.TestImages.Image;
import io.registrycache.testsupport.UpstreamRegistryContainer;
import java.net.http.HttpResponse;
import java.nio.file.Path;
import java.time.Duration;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * Two replicas on one bucket, one after the other, each with its own empty {@code storage.path}:
 * what the first pulled (blobs, manifest, tag link) the second, started afterwards in offline mode,
 * finds at start-up and serves without the upstream. The shared store replaces the shared disk.
 */
class S3SharedStoreIT {

  static final String BUCKET = "registry-cache-shared";
  static final UpstreamRegistryContainer upstream = UpstreamRegistryContainer.started();
  static S3TestServer s3;

  @TempDir Path first;
  @TempDir Path second;

  @BeforeAll
  static void startS3() {
    s3 = S3TestServer.started(BUCKET);
  }

  @AfterAll
  static void stopS3() {
    s3.close();
  }

  static ManualCache replica(Path storage, boolean offline) {
    return ManualCache.start(
        s3.storeIn(
            CacheProperties.cache(storage)
                .localUpstream(upstream::baseUrl)
                .set("registry-cache.offline", String.valueOf(offline))));
  }

  @Test
  void aReplicaStartedLaterOnTheSameBucketServesWhatTheFirstStoredOffline() {
    Image image =
        upstream
            .pusher()
            .push(
                TestImages.withLargeLayer(
                    TestImages.uniqueRepository("shared"), "v1", 6 * 1024 * 1024 + 3));
    try (ManualCache a = replica(first, false)) {
      a.client().withTimeout(Duration.ofSeconds(30)).pullAndVerify(image);
    }
    long upstreamRequests = upstream.requests().size();

    try (ManualCache b = replica(second, true)) {
      BlobStore blobs = b.context().getBean(BlobStore.class);
      assertThat(blobs).isInstanceOf(S3BlobStore.class);
      assertThat(blobs.count())
          .as("blobs listed from the bucket at start-up")
          .isEqualTo(image.blobs().size());
      CacheClient cache = b.client().withTimeout(Duration.ofSeconds(30));
      CacheClient.assertManifest(
          cache.getManifest("/v2/" + image.repository() + "/manifests/v1"), image.manifest());
      for (Blob blob : image.blobs()) {
        HttpResponse<byte[]> response =
            cache.get("/v2/" + image.repository() + "/blobs/" + blob.digest());
        assertThat(response.statusCode()).as(describe(response)).isEqualTo(200);
        assertThat(Sha256.digest(response.body())).isEqualTo(blob.digest());
      }
    }
    assertThat(upstream.requests())
        .as("the offline replica never asked the upstream")
        .hasSize((int) upstreamRequests);
  }
}
