package io.registrycache.startup;

import static org.assertj.core.api.Assertions.assertThat;

import io.registrycache.oci.Digest;
import java.net.InetAddress;
import java.net.ServerSocket;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.Test;
import tools.jackson.databind.JsonNode;
import tools.jackson.databind.json.JsonMapper;

/**
 * The synthetic image the AOT cache's training run pulls through: a valid OCI image, every digest
 * true.
 */
class TrainingUpstreamTest {

  private final HttpClient http = HttpClient.newHttpClient();

  private HttpResponse<byte[]> get(int port, String path) throws Exception {
    return http.send(
        HttpRequest.newBuilder(URI.create("http://127.0.0.1:" + port + path)).build(),
        HttpResponse.BodyHandlers.ofByteArray());
  }

  @Test
  void servesAnImageWhoseManifestAndBlobsMatchTheirDigests() throws Exception {
    int port;
    try (ServerSocket s = new ServerSocket(0, 1, InetAddress.getLoopbackAddress())) {
      port = s.getLocalPort();
    }
    try (TrainingUpstream upstream = TrainingUpstream.start(port)) {
      assertThat(get(port, "/v2/").statusCode()).isEqualTo(200);
      HttpResponse<byte[]> manifest =
          get(port, "/v2/" + TrainingUpstream.REPOSITORY + "/manifests/" + TrainingUpstream.TAG);
      assertThat(manifest.statusCode()).isEqualTo(200);
      assertThat(manifest.headers().firstValue("Content-Type"))
          .hasValue("application/vnd.oci.image.manifest.v1+json");
      assertThat(manifest.headers().firstValue("Docker-Content-Digest"))
          .hasValue(Digest.sha256(manifest.body()).toString());

      JsonNode json = JsonMapper.builder().build().readTree(manifest.body());
      List<String> referenced = new ArrayList<>();
      referenced.add(json.get("config").get("digest").asString());
      json.get("layers").forEach(l -> referenced.add(l.get("digest").asString()));
      assertThat(referenced).containsExactlyElementsOf(upstream.blobDigests());

      long largest = 0;
      for (JsonNode descriptor : json.get("layers")) {
        HttpResponse<byte[]> blob =
            get(
                port,
                "/v2/"
                    + TrainingUpstream.REPOSITORY
                    + "/blobs/"
                    + descriptor.get("digest").asString());
        assertThat(blob.statusCode()).isEqualTo(200);
        assertThat(Digest.sha256(blob.body()).toString())
            .isEqualTo(descriptor.get("digest").asString());
        assertThat((long) blob.body().length).isEqualTo(descriptor.get("size").asLong());
        largest = Math.max(largest, blob.body().length);
      }
      assertThat(largest).as("a layer over one write batch of a fill").isGreaterThan(1 << 20);
      assertThat(
              get(port, "/v2/" + TrainingUpstream.REPOSITORY + "/blobs/sha256:" + "0".repeat(64))
                  .statusCode())
          .isEqualTo(404);
      assertThat(get(port, "/v2/other/manifests/latest").statusCode()).isEqualTo(404);
    }
  }
}
