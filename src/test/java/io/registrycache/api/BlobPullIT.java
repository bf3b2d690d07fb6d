package io.registrycache.api;

import static io.registrycache.testsupport.CacheClient.describe;
import static org.assertj.core.api.Assertions.assertThat;

import io.registrycache.it.AbstractCacheIT;
import io.registrycache.testsupport.Sha256;
import io.registrycache.testsupport.TestImages;
import io.registrycache.testsupport.TestImages.Blob;
import io.registrycache.testsupport.TestImages.Image;
import java.net.http.HttpResponse;
import java.nio.file.Files;
import java.util.Arrays;
import org.junit.jupiter.api.Test;

/** Blobs through the cache: digests, headers, HEAD, storage layout and Range requests. */
class BlobPullIT extends AbstractCacheIT {

  @Test
  void blobsHaveTheirDigestAndHeaders() throws Exception {
    Image image =
        upstream.pusher().push(TestImages.smallOci(TestImages.uniqueRepository("blob"), "v1"));
    for (Blob blob : image.blobs()) {
      HttpResponse<byte[]> response =
          cache.get("/v2/" + image.repository() + "/blobs/" + blob.digest());
      assertThat(response.statusCode()).as(describe(response)).isEqualTo(200);
      assertThat(Sha256.digest(response.body())).isEqualTo(blob.digest());
      assertThat(response.body()).isEqualTo(blob.bytes());
      assertThat(response.headers().firstValue("Docker-Content-Digest")).hasValue(blob.digest());
      assertThat(response.headers().firstValue("Content-Length"))
          .hasValue(Long.toString(blob.size()));
      assertThat(response.headers().firstValue("Content-Type")).isPresent();
      assertThat(response.headers().firstValue("Accept-Ranges")).hasValue("bytes");

      // content-addressed on disk, once committed
      awaitDownloadsCommitted();
      assertThat(blobFile(storage, blob.digest())).exists();
      assertThat(Files.readAllBytes(blobFile(storage, blob.digest()))).isEqualTo(blob.bytes());

      // warm: same again
      HttpResponse<byte[]> warm =
          cache.get("/v2/" + image.repository() + "/blobs/" + blob.digest());
      assertThat(warm.statusCode()).isEqualTo(200);
      assertThat(warm.body()).isEqualTo(blob.bytes());
    }
  }

  @Test
  void headOfAColdAndAWarmBlob() {
    Image image =
        upstream.pusher().push(TestImages.smallOci(TestImages.uniqueRepository("bhead"), "v1"));
    Blob blob = image.layers().get(0);
    String path = "/v2/" + image.repository() + "/blobs/" + blob.digest();
    for (int i = 0; i < 2; i++) {
      HttpResponse<byte[]> head = cache.head(path);
      assertThat(head.statusCode()).as(describe(head)).isEqualTo(200);
      assertThat(head.body()).isEmpty();
      assertThat(head.headers().firstValue("Docker-Content-Digest")).hasValue(blob.digest());
      assertThat(head.headers().firstValue("Content-Length")).hasValue(Long.toString(blob.size()));
    }
    HttpResponse<byte[]> get = cache.get(path);
    assertThat(get.body()).isEqualTo(blob.bytes());
  }

  @Test
  void rangeRequests() {
    Image image =
        upstream.pusher().push(TestImages.smallOci(TestImages.uniqueRepository("range"), "v1"));
    Blob blob = image.layers().get(0);
    int size = blob.bytes().length;
    assertThat(size).isGreaterThan(2000);
    String path = "/v2/" + image.repository() + "/blobs/" + blob.digest();

    // cold: the first request the cache ever sees for this blob is a Range request
    assertPartial(cache.get(path, "Range", "bytes=500-1499"), blob, 500, 1499);
    // warm
    assertPartial(cache.get(path, "Range", "bytes=500-1499"), blob, 500, 1499);
    assertPartial(cache.get(path, "Range", "bytes=500-"), blob, 500, size - 1);
    assertPartial(cache.get(path, "Range", "bytes=-500"), blob, size - 500, size - 1);
    assertPartial(cache.get(path, "Range", "bytes=0-0"), blob, 0, 0);
    assertPartial(cache.get(path, "Range", "bytes=" + (size - 1) + "-"), blob, size - 1, size - 1);
    // an end past the size is clamped
    assertPartial(cache.get(path, "Range", "bytes=500-" + (size + 1000)), blob, 500, size - 1);
  }

  @Test
  void unsatisfiableRanges() {
    Image image =
        upstream.pusher().push(TestImages.smallOci(TestImages.uniqueRepository("r416"), "v1"));
    Blob blob = image.layers().get(0);
    int size = blob.bytes().length;
    String path = "/v2/" + image.repository() + "/blobs/" + blob.digest();
    assertThat(cache.get(path).statusCode()).isEqualTo(200);

    for (String range :
        new String[] {
          "bytes=500-0", "bytes=" + size + "-", "bytes=" + (size + 10) + "-" + (size + 20)
        }) {
      HttpResponse<byte[]> response = cache.get(path, "Range", range);
      assertThat(response.statusCode()).as(range + ": " + describe(response)).isEqualTo(416);
    }
    // still fine afterwards
    assertThat(cache.get(path).body()).isEqualTo(blob.bytes());
  }

  @Test
  void unsatisfiableRangeNamesTheSize() {
    // RFC 9110 15.5.17: a 416 to a byte-range request SHOULD carry "Content-Range: bytes */<size>".
    Image image =
        upstream.pusher().push(TestImages.smallOci(TestImages.uniqueRepository("r416s"), "v1"));
    Blob blob = image.layers().get(0);
    String path = "/v2/" + image.repository() + "/blobs/" + blob.digest();
    assertThat(cache.get(path).statusCode()).isEqualTo(200);
    HttpResponse<byte[]> response = cache.get(path, "Range", "bytes=" + (blob.size() + 1) + "-");
    assertThat(response.statusCode()).isEqualTo(416);
    assertThat(response.headers().firstValue("Content-Range")).hasValue("bytes */" + blob.size());
  }

  static void assertPartial(HttpResponse<byte[]> response, Blob blob, int first, int last) {
    int size = blob.bytes().length;
    assertThat(response.statusCode()).as(describe(response)).isEqualTo(206);
    assertThat(response.headers().firstValue("Content-Range"))
        .hasValue("bytes " + first + "-" + last + "/" + size);
    assertThat(response.headers().firstValue("Content-Length"))
        .hasValue(Integer.toString(last - first + 1));
    assertThat(response.body()).isEqualTo(Arrays.copyOfRange(blob.bytes(), first, last + 1));
  }
}
