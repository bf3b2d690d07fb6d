package io.registrycache.storage.s3;

import static org.assertj.core.api.Assertions.assertThat;

import io.registrycache.testsupport.Command;
import io.registrycache.testsupport.Containerd;
import io.registrycache.testsupport.TestImages;
import io.registrycache.testsupport.TestImages.Blob;
import io.registrycache.testsupport.TestImages.Image;
import java.net.URI;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.file.Path;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.springframework.test.context.DynamicPropertyRegistry;
import org.springframework.test.context.DynamicPropertySource;

/**
 * The same on {@code storage.s3.redirect=true}: a second pull is answered with 307 to a presigned
 * URL of the object, which skopeo and containerd follow; a ranged GET's Range header is honoured by
 * the store.
 */
class S3StorageRedirectIT extends S3StoragePullIT {
  @DynamicPropertySource
  static void redirect(DynamicPropertyRegistry registry) {
    registry.add("registry-cache.storage.s3.redirect", () -> "true");
  }

  @Override
  HttpResponse<byte[]> rangedGet(String path, String range) throws Exception {
    HttpResponse<byte[]> redirect = cache.get(path, "Range", range);
    assertThat(redirect.statusCode()).isEqualTo(307);
    assertThat(redirect.headers().firstValue("Docker-Content-Digest")).isPresent();
    URI location = URI.create(redirect.headers().firstValue("Location").orElseThrow());
    assertThat(location.getPort()).as("the object store").isEqualTo(S3.uri().getPort());
    return cache
        .http()
        .send(
            HttpRequest.newBuilder(location).header("Range", range).build(),
            HttpResponse.BodyHandlers.ofByteArray());
  }

  @Test
  void containerdFollowsTheRedirectToTheBucket(@TempDir Path hostsDir) throws Exception {
    Containerd.require();
    Containerd containerd = new Containerd();
    Image image =
        upstream.pusher().push(TestImages.smallOci(TestImages.uniqueRepository("s3ctr"), "v1"));
    copy(
        image,
        work.resolve("fill")); // the first pull streams through the replica and fills the bucket
    awaitDownloadsCommitted();
    HttpResponse<byte[]> layer =
        cache.get("/v2/" + image.repository() + "/blobs/" + image.largestLayer().digest());
    assertThat(layer.statusCode()).as("a stored blob is answered with a redirect").isEqualTo(307);
    long upstreamGets = upstreamBlobGets(image);

    Containerd.writeHostsToml(hostsDir, UPSTREAM_HOST, port);
    String ref = UPSTREAM_HOST + "/" + image.repository() + ":v1";
    try {
      Command.Result pull = containerd.pull(hostsDir, ref);
      assertThat(pull.exitCode()).as(pull.output()).isZero();
      assertThat(containerd.complete(ref))
          .as(
              "every blob fetched from the bucket and checked by containerd: %s",
              containerd.ctr("images", "check").output())
          .isTrue();
      assertThat(upstreamBlobGets(image)).as("no blob from the upstream").isEqualTo(upstreamGets);
    } finally {
      containerd.removePulled();
    }
  }

  private static long upstreamBlobGets(Image image) {
    upstream.syncLogs();
    long gets = 0;
    for (Blob blob : image.blobs()) {
      gets +=
          upstream.countRequests("GET", "/v2/" + image.repository() + "/blobs/" + blob.digest());
    }
    return gets;
  }
}
