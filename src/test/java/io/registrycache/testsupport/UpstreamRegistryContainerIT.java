package io.registrycache.testsupport;

import static org.assertj.core.api.Assertions.assertThat;

import io.registrycache.testsupport.TestImages.Blob;
import io.registrycache.testsupport.TestImages.Image;
import io.registrycache.testsupport.TestImages.ImageIndex;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * Checks the fixtures themselves against a real registry:2, without the cache: what ImagePusher
 * pushes comes back byte for byte, and the request log is counted right, also across stop/start.
 */
class UpstreamRegistryContainerIT {

  static final UpstreamRegistryContainer upstream = new UpstreamRegistryContainer();
  static final HttpClient http =
      HttpClient.newBuilder().version(HttpClient.Version.HTTP_1_1).build();

  @BeforeAll
  static void start() {
    upstream.start();
  }

  @AfterAll
  static void stop() {
    upstream.stop();
  }

  @Test
  void pushedManifestsAndBlobsComeBackByteExact() throws Exception {
    Image oci =
        upstream.pusher().push(TestImages.smallOci(TestImages.uniqueRepository("fx"), "v1"));
    Image docker =
        upstream.pusher().push(TestImages.dockerSchema2(TestImages.uniqueRepository("fx"), "v1"));
    ImageIndex index =
        upstream.pusher().push(TestImages.index(TestImages.uniqueRepository("fx"), "multi"));

    for (Image image : new Image[] {oci, docker, index.platform("arm64").image()}) {
      String ref = image == oci || image == docker ? image.tag() : image.manifest().digest();
      HttpResponse<byte[]> m =
          get("/v2/" + image.repository() + "/manifests/" + ref, image.manifest().mediaType());
      assertThat(m.statusCode()).isEqualTo(200);
      assertThat(m.body()).isEqualTo(image.manifest().bytes());
      assertThat(m.headers().firstValue("Content-Type")).hasValue(image.manifest().mediaType());
      for (Blob blob : image.blobs()) {
        HttpResponse<byte[]> b =
            get("/v2/" + image.repository() + "/blobs/" + blob.digest(), "*/*");
        assertThat(b.statusCode()).isEqualTo(200);
        assertThat(Sha256.digest(b.body())).isEqualTo(blob.digest());
      }
    }
    HttpResponse<byte[]> idx =
        get("/v2/" + index.repository() + "/manifests/multi", TestImages.OCI_INDEX);
    assertThat(idx.body()).isEqualTo(index.index().bytes());
    assertThat(index.index().text()).contains(index.platform("amd64").image().manifest().digest());
  }

  @Test
  void countsRequestsFromTheLogAndSurvivesStopStart() throws Exception {
    Image image =
        upstream.pusher().push(TestImages.smallOci(TestImages.uniqueRepository("fx"), "v1"));
    String path = "/v2/" + image.repository() + "/blobs/" + image.config().digest();
    upstream.syncLogs();
    assertThat(upstream.countRequests("GET", path)).isZero();
    get(path, "*/*");
    get(path, "*/*");
    upstream.syncLogs();
    assertThat(upstream.countRequests("GET", path)).isEqualTo(2);
    assertThat(upstream.countRequests("HEAD", path)).isZero();
    // 404s are logged as "response completed with error"; still counted
    String missing = "/v2/" + image.repository() + "/blobs/" + TestImages.unknownDigest();
    assertThat(get(missing, "*/*").statusCode()).isEqualTo(404);
    upstream.syncLogs();
    assertThat(upstream.countRequests("GET", missing)).isEqualTo(1);

    upstream.stopUpstream();
    assertThat(upstream.countRequests("GET", path)).isEqualTo(2);
    upstream.startUpstream();
    HttpResponse<byte[]> again = get(path, "*/*");
    assertThat(again.statusCode()).isEqualTo(200);
    assertThat(again.body()).isEqualTo(image.config().bytes());
  }

  private static HttpResponse<byte[]> get(String path, String accept) throws Exception {
    return http.send(
        HttpRequest.newBuilder(URI.create(upstream.baseUrl() + path))
            .header("Accept", accept)
            .build(),
        HttpResponse.BodyHandlers.ofByteArray());
  }
}
