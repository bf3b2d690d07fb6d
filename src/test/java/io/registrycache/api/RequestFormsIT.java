package io.registrycache.api;

import static io.registrycache.testsupport.CacheClient.describe;
import static org.assertj.core.api.Assertions.assertThat;

import io.registrycache.it.AbstractCacheIT;
import io.registrycache.testsupport.CacheClient;
import io.registrycache.testsupport.Sha256;
import io.registrycache.testsupport.TestImages;
import io.registrycache.testsupport.TestImages.Blob;
import io.registrycache.testsupport.TestImages.Image;
import java.net.http.HttpResponse;
import org.junit.jupiter.api.Test;

/**
 * The three request forms — bare {@code /v2/<name>}, in-path {@code /v2/<host>/<name>} and
 * containerd's {@code /v2/<name>?ns=<host>} — name the same cache entry: only the first one
 * fetches.
 */
class RequestFormsIT extends AbstractCacheIT {

  @Test
  void allFormsShareOneBlobEntry() {
    Image image =
        upstream.pusher().push(TestImages.smallOci(TestImages.uniqueRepository("forms"), "v1"));
    Blob blob = image.layers().get(0);
    String upstreamPath = "/v2/" + image.repository() + "/blobs/" + blob.digest();

    String[] forms = {
      "/v2/" + image.repository() + "/blobs/" + blob.digest(),
      "/v2/" + UPSTREAM_HOST + "/" + image.repository() + "/blobs/" + blob.digest(),
      "/v2/" + image.repository() + "/blobs/" + blob.digest() + "?ns=" + UPSTREAM_HOST,
    };
    for (int i = 0; i < forms.length; i++) {
      HttpResponse<byte[]> response = cache.get(forms[i]);
      assertThat(response.statusCode()).as(describe(response)).isEqualTo(200);
      assertThat(Sha256.digest(response.body())).isEqualTo(blob.digest());
      upstream.syncLogs();
      assertThat(upstream.countRequests("GET", upstreamPath))
          .as("upstream GETs of the blob after form %d (%s)", i + 1, forms[i])
          .isEqualTo(1);
    }
  }

  @Test
  void startingFromTheNsFormTheOthersAreHits() {
    Image image =
        upstream.pusher().push(TestImages.smallOci(TestImages.uniqueRepository("forms"), "v1"));
    String prefix = "/v2/" + image.repository() + "/";
    String[] forms = {
      "/v2/" + image.repository() + "/manifests/v1?ns=" + UPSTREAM_HOST,
      "/v2/" + UPSTREAM_HOST + "/" + image.repository() + "/manifests/v1",
      "/v2/" + image.repository() + "/manifests/v1",
    };
    long afterFirst = -1;
    for (int i = 0; i < forms.length; i++) {
      HttpResponse<byte[]> response = cache.getManifest(forms[i]);
      CacheClient.assertManifest(response, image.manifest());
      upstream.syncLogs();
      long n = upstream.countRequestsUnder(prefix);
      if (i == 0) {
        afterFirst = n;
        assertThat(n).as("the first form fetches").isPositive();
      } else {
        assertThat(n)
            .as("upstream requests after form %d (%s)", i + 1, forms[i])
            .isEqualTo(afterFirst);
      }
    }
  }

  @Test
  void nsFormEchoesTheNamespace() {
    Image image =
        upstream.pusher().push(TestImages.smallOci(TestImages.uniqueRepository("ns"), "v1"));
    HttpResponse<byte[]> manifest =
        cache.getManifest("/v2/" + image.repository() + "/manifests/v1?ns=" + UPSTREAM_HOST);
    assertThat(manifest.statusCode()).as(describe(manifest)).isEqualTo(200);
    assertThat(manifest.headers().firstValue("OCI-Namespace")).hasValue(UPSTREAM_HOST);
    HttpResponse<byte[]> blob =
        cache.get(
            "/v2/"
                + image.repository()
                + "/blobs/"
                + image.config().digest()
                + "?ns="
                + UPSTREAM_HOST);
    assertThat(blob.statusCode()).isEqualTo(200);
    assertThat(blob.headers().firstValue("OCI-Namespace")).hasValue(UPSTREAM_HOST);
    assertThat(blob.body()).isEqualTo(image.config().bytes());
  }

  @Test
  void inPathFormServesManifestsAndBlobsByteExact() {
    Image image =
        upstream
            .pusher()
            .push(TestImages.dockerSchema2(TestImages.uniqueRepository("inpath"), "v1"));
    String base = "/v2/" + UPSTREAM_HOST + "/" + image.repository();
    CacheClient.assertManifest(cache.getManifest(base + "/manifests/v1"), image.manifest());
    CacheClient.assertManifest(
        cache.getManifest(base + "/manifests/" + image.manifest().digest()), image.manifest());
    for (Blob blob : image.blobs()) {
      HttpResponse<byte[]> response = cache.get(base + "/blobs/" + blob.digest());
      assertThat(response.statusCode()).isEqualTo(200);
      assertThat(response.body()).isEqualTo(blob.bytes());
    }
  }
}
