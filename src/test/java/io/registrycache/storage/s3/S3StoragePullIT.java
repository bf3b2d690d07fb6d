package io.registrycache.storage.s3;

import static org.assertj.core.api.Assertions.assertThat;

import io.registrycache.it.AbstractCacheIT;
import io.registrycache.oci.Digest;
import io.registrycache.storage.BlobStore;
import io.registrycache.testsupport.Command;
import io.registrycache.testsupport.NeedsTool;
import io.registrycache.testsupport.S3TestServer;
import io.registrycache.testsupport.Sha256;
import io.registrycache.testsupport.TestFiles;
import io.registrycache.testsupport.TestImages;
import io.registrycache.testsupport.TestImages.Blob;
import io.registrycache.testsupport.TestImages.Image;
import java.net.http.HttpResponse;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;
import org.junit.jupiter.api.io.TempDir;
import org.springframework.beans.factory.annotation.Autowired;
import org.springframework.boot.test.system.CapturedOutput;
import org.springframework.boot.test.system.OutputCaptureExtension;
import org.springframework.test.context.DynamicPropertyRegistry;
import org.springframework.test.context.DynamicPropertySource;

/**
 * The whole service on {@code registry-cache.storage.type=s3}: a real {@code registry:2} upstream
 * (Testcontainers), a real S3-API server in the test JVM (s3proxy, signature v4), and {@code
 * skopeo} as the client. The blobs land in the bucket under {@code <prefix>/blobs/sha256/<hex>},
 * the manifest and tag link under {@code manifests/} and {@code tags/} (none on the local disk), a
 * layer larger than two parts goes up as a multipart upload, and a second pull is served from the
 * bucket, whole and ranged, without the upstream.
 */
@NeedsTool("skopeo")
@ExtendWith(OutputCaptureExtension.class)
class S3StoragePullIT extends AbstractCacheIT {

  static final String BUCKET = "registry-cache-it";

  /**
   * Started when this class, {@link S3StorageRedirectIT} or {@link S3LocalTierPullIT} is first
   * used; it lives as long as the JVM.
   */
  static final S3TestServer S3 = S3TestServer.started(BUCKET);

  @TempDir Path work;
  @Autowired BlobStore blobs;
  @Autowired S3Objects objects;

  @DynamicPropertySource
  static void s3Properties(DynamicPropertyRegistry registry) {
    S3.addStorageTo(registry);
    registry.add("registry-cache.storage.s3.prefix", () -> "it-cache");
  }

  @BeforeAll
  static void needsSkopeo() {
    Command.requireTool(
        Command.onPath("skopeo"), "skopeo is not installed (apt-get install skopeo)");
  }

  Command.Result skopeo(String... args) {
    List<String> command =
        new ArrayList<>(List.of("skopeo", "--insecure-policy", "--command-timeout", "120s"));
    command.addAll(List.of(args));
    return Command.run(Duration.ofSeconds(150), command).assertSuccess();
  }

  void copy(Image image, Path layout) {
    skopeo(
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
        // dir: keeps layers as they are (oci: would compress the uncompressed tar layer)
        "dir:" + layout);
    for (Blob blob : image.blobs()) {
      Path file = layout.resolve(Sha256.hexOf(blob.digest()));
      assertThat(file)
          .as("blob %s (%s) in %s", blob.digest(), blob.mediaType(), TestFiles.regularFiles(layout))
          .exists();
      assertThat(Sha256.digest(file))
          .as("blob %s as skopeo stored it", blob.digest())
          .isEqualTo(blob.digest());
    }
  }

  @Test
  void skopeoPullsThroughTheObjectStoreAndASecondPullIsServedFromTheBucket(CapturedOutput output)
      throws Exception {
    assertThat(blobs).isInstanceOf(S3BlobStore.class);
    int large = 11 * 1024 * 1024 + 17; // three 5 MiB parts
    Image image =
        upstream
            .pusher()
            .push(TestImages.withLargeLayer(TestImages.uniqueRepository("s3"), "v1", large));

    copy(image, work.resolve("first"));
    awaitDownloadsCommitted();

    for (Blob blob : image.blobs()) {
      Digest digest = Digest.parse(blob.digest());
      assertThat(objects.stat(S3BlobStore.key(digest)).block())
          .as("blob %s under its final key", blob.digest())
          .hasValueSatisfying(info -> assertThat(info.size()).isEqualTo(blob.size()));
      assertThat(blobFile(storage, blob.digest())).as("nothing on the local disk").doesNotExist();
    }
    assertThat(objects.uploadsInProgress("").collectList().block())
        .as("no upload left open")
        .isEmpty();
    assertThat(objects.stat("manifests/sha256/" + Sha256.hexOf(image.manifest().digest())).block())
        .as("the manifest in the bucket")
        .isPresent();
    assertThat(objects.list("tags/").collectList().block())
        .as("the tag link in the bucket")
        .anySatisfy(k -> assertThat(k).endsWith("/" + image.repository() + "/_tags/v1"));
    assertThat(TestFiles.regularFiles(storage.resolve("manifests")))
        .as("no manifest on the local disk")
        .isEmpty();
    assertThat(TestFiles.regularFiles(storage.resolve("blobs"))).isEmpty();

    String layerPath = "/v2/" + image.repository() + "/blobs/" + image.largestLayer().digest();
    long upstreamBlobGets = upstream.countRequests("GET", layerPath);
    copy(image, work.resolve("second"));
    HttpResponse<byte[]> ranged = rangedGet(layerPath, "bytes=5242870-5242889");
    assertThat(ranged.statusCode()).isEqualTo(206);
    assertThat(ranged.body())
        .isEqualTo(Arrays.copyOfRange(image.largestLayer().bytes(), 5_242_870, 5_242_890));
    assertThat(upstream.countRequests("GET", layerPath))
        .as("the second pull and the range came from the bucket")
        .isEqualTo(upstreamBlobGets);
    assertThat(output.getAll())
        .as("the store's settings are logged at start-up, the secret never")
        .contains("secretAccessKey=(set)")
        .doesNotContain(S3.secretKey());
  }

  /**
   * GET with a Range header, straight from the cache (the default: streamed through the replica).
   */
  HttpResponse<byte[]> rangedGet(String path, String range) throws Exception {
    HttpResponse<byte[]> response = cache.get(path, "Range", range);
    assertThat(response.statusCode()).as("no redirect by default").isNotEqualTo(307);
    return response;
  }
}
