package io.registrycache.storage.s3;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import io.registrycache.it.AbstractCacheIT;
import io.registrycache.oci.Digest;
import io.registrycache.storage.BlobStore;
import io.registrycache.storage.StoredContent;
import io.registrycache.testsupport.Command;
import io.registrycache.testsupport.NeedsTool;
import io.registrycache.testsupport.Sha256;
import io.registrycache.testsupport.TestFiles;
import io.registrycache.testsupport.TestImages;
import io.registrycache.testsupport.TestImages.Blob;
import io.registrycache.testsupport.TestImages.Image;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.springframework.beans.factory.annotation.Autowired;
import org.springframework.test.context.DynamicPropertyRegistry;
import org.springframework.test.context.DynamicPropertySource;

/**
 * The whole service on {@code storage.type=s3} with the local disk tier on ({@code
 * storage.s3.local-tier-size}): a real {@code registry:2} upstream, s3proxy, and {@code skopeo}. A
 * pull-through leaves every blob in the bucket and a verified copy on the replica's disk; the next
 * pull is served from those copies (shown by deleting the bucket's objects first: the pull still
 * succeeds, byte for byte, without the upstream).
 */
@NeedsTool("skopeo")
class S3LocalTierPullIT extends AbstractCacheIT {

  @TempDir Path work;
  @Autowired BlobStore blobs;
  @Autowired S3Objects objects;

  /** The s3proxy and bucket of {@link S3StoragePullIT} (one per JVM), under another key prefix. */
  @DynamicPropertySource
  static void s3Properties(DynamicPropertyRegistry registry) {
    S3StoragePullIT.S3.addStorageTo(registry);
    registry.add("registry-cache.storage.s3.prefix", () -> "it-tier");
    registry.add("registry-cache.storage.s3.local-tier-size", () -> "64MB");
  }

  @BeforeAll
  static void needsSkopeo() {
    Command.requireTool(
        Command.onPath("skopeo"), "skopeo is not installed (apt-get install skopeo)");
  }

  void copy(Image image, Path layout) {
    Command.run(
            Duration.ofSeconds(150),
            List.of(
                "skopeo",
                "--insecure-policy",
                "--command-timeout",
                "120s",
                "copy",
                "--src-tls-verify=false",
                "--src-no-creds",
                "docker://localhost:"
                    + port
                    + "/"
                    + UPSTREAM_HOST
                    + "/"
                    + image.repository()
                    + ":"
                    + image.tag(),
                "dir:" + layout))
        .assertSuccess();
    for (Blob blob : image.blobs()) {
      Path file = layout.resolve(Sha256.hexOf(blob.digest()));
      assertThat(file).as("blob %s in %s", blob.digest(), TestFiles.regularFiles(layout)).exists();
      assertThat(Sha256.digest(file))
          .as("blob %s as skopeo stored it", blob.digest())
          .isEqualTo(blob.digest());
    }
  }

  @Test
  void aPullLeavesVerifiedLocalCopiesAndTheNextPullIsServedFromThem() throws Exception {
    Image image =
        upstream
            .pusher()
            .push(
                TestImages.withLargeLayer(
                    TestImages.uniqueRepository("tier"), "v1", 6 * 1024 * 1024 + 3));
    copy(image, work.resolve("first"));
    awaitDownloadsCommitted();

    for (Blob blob : image.blobs()) {
      Digest digest = Digest.parse(blob.digest());
      assertThat(objects.stat(S3BlobStore.key(digest)).block())
          .as("blob %s in the bucket", blob.digest())
          .isPresent();
      await()
          .atMost(Duration.ofSeconds(20))
          .until(() -> blobs.open(digest).flatMap(StoredContent::file).isPresent());
      Path local = blobs.open(digest).flatMap(StoredContent::file).orElseThrow();
      assertThat(local).startsWith(storage);
      assertThat(Sha256.digest(local))
          .as("the local copy of %s", blob.digest())
          .isEqualTo(blob.digest());
    }

    long upstreamGets = upstream.countRequestsUnder("/v2/" + image.repository() + "/blobs/");
    for (Blob blob : image.blobs()) {
      objects
          .delete(S3BlobStore.key(Digest.parse(blob.digest())))
          .block(); // only the local copies are left
    }
    copy(image, work.resolve("second"));
    assertThat(upstream.countRequestsUnder("/v2/" + image.repository() + "/blobs/"))
        .as("the second pull came from the local tier")
        .isEqualTo(upstreamGets);
    assertThat(Files.list(work.resolve("second")).count()).isGreaterThan(image.blobs().size());
  }
}
