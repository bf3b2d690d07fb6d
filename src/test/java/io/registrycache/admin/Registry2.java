package io.registrycache.admin;

import static org.assertj.core.api.Assertions.assertThat;

import io.registrycache.oci.Digest;
import java.io.IOException;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Random;
import org.testcontainers.containers.GenericContainer;
import org.testcontainers.containers.wait.strategy.Wait;
import org.testcontainers.utility.DockerImageName;

/**
 * A {@code registry:2} upstream shared by the admin ITs of one JVM (started once), plus what the
 * tests do with registries: push images over the push API, pull them and check every digest.
 */
final class Registry2 {

  static final GenericContainer<?> CONTAINER =
      new GenericContainer<>(DockerImageName.parse("registry:2"))
          .withExposedPorts(5000)
          .waitingFor(Wait.forHttp("/v2/").forPort(5000).forStatusCode(200))
          .withStartupTimeout(Duration.ofSeconds(60));

  static {
    CONTAINER.start();
  }

  static final HttpClient HTTP =
      HttpClient.newBuilder().version(HttpClient.Version.HTTP_1_1).connectTimeout(Duration.ofSeconds(5)).build();

  static final String ACCEPT = String.join(",",
      "application/vnd.oci.image.index.v1+json",
      "application/vnd.oci.image.manifest.v1+json",
      "application/vnd.docker.distribution.manifest.list.v2+json",
      "application/vnd.docker.distribution.manifest.v2+json");

  private Registry2() {}

  static String hostAndPort() {
    return "localhost:" + CONTAINER.getMappedPort(5000);
  }

  static String url() {
    return "http://" + hostAndPort();
  }

  /** An image pushed: its manifest digest and its blobs (config first). */
  record Pushed(String repository, String tag, Digest manifest, List<Digest> blobs) {}

  /** Pushes an image with a small config and the given layers. */
  static Pushed push(String repository, String tag, byte[]... layers) throws Exception {
    byte[] config = ("{\"architecture\":\"amd64\",\"os\":\"linux\",\"rootfs\":{\"type\":\"layers\"},\"x\":\""
        + repository + ":" + tag + "\"}").getBytes(StandardCharsets.UTF_8);
    List<Digest> blobs = new ArrayList<>();
    blobs.add(pushBlob(repository, config));
    StringBuilder layersJson = new StringBuilder();
    for (byte[] layer : layers) {
      Digest d = pushBlob(repository, layer);
      blobs.add(d);
      layersJson.append(layersJson.length() > 0 ? "," : "")
          .append("{\"mediaType\":\"application/vnd.oci.image.layer.v1.tar+gzip\",\"digest\":\"").append(d)
          .append("\",\"size\":").append(layer.length).append("}");
    }
    String manifest = "{\"schemaVersion\":2,\"mediaType\":\"application/vnd.oci.image.manifest.v1+json\","
        + "\"config\":{\"mediaType\":\"application/vnd.oci.image.config.v1+json\",\"digest\":\"" + blobs.get(0)
        + "\",\"size\":" + config.length + "},\"layers\":[" + layersJson + "]}";
    byte[] body = manifest.getBytes(StandardCharsets.UTF_8);
    HttpResponse<String> r = HTTP.send(
        HttpRequest.newBuilder(URI.create(url() + "/v2/" + repository + "/manifests/" + tag))
            .header("Content-Type", "application/vnd.oci.image.manifest.v1+json")
            .PUT(HttpRequest.BodyPublishers.ofByteArray(body)).build(),
        HttpResponse.BodyHandlers.ofString());
    assertThat(r.statusCode()).as("manifest push: %s", r.body()).isEqualTo(201);
    return new Pushed(repository, tag, Digest.sha256(body), blobs);
  }

  /** Monolithic upload: POST for a location, then PUT the bytes with {@code digest=}. */
  static Digest pushBlob(String repository, byte[] content) throws Exception {
    Digest digest = Digest.sha256(content);
    HttpResponse<String> start = HTTP.send(
        HttpRequest.newBuilder(URI.create(url() + "/v2/" + repository + "/blobs/uploads/"))
            .POST(HttpRequest.BodyPublishers.noBody()).build(),
        HttpResponse.BodyHandlers.ofString());
    assertThat(start.statusCode()).as("upload start: %s", start.body()).isEqualTo(202);
    String location = start.headers().firstValue("Location").orElseThrow();
    URI target = URI.create(url()).resolve(location);
    String sep = target.toString().contains("?") ? "&" : "?";
    HttpResponse<String> put = HTTP.send(
        HttpRequest.newBuilder(URI.create(target + sep + "digest=" + digest))
            .header("Content-Type", "application/octet-stream")
            .PUT(HttpRequest.BodyPublishers.ofByteArray(content)).build(),
        HttpResponse.BodyHandlers.ofString());
    assertThat(put.statusCode()).as("upload: %s", put.body()).isEqualTo(201);
    return digest;
  }

  static byte[] random(int size, long seed) {
    byte[] b = new byte[size];
    new Random(seed).nextBytes(b);
    return b;
  }

  /**
   * Pulls an image through the cache at {@code base} as a client would: the manifest by tag,
   * then every blob; asserts the manifest digest and every blob's digest.
   */
  static void pull(String base, Pushed image) throws IOException, InterruptedException {
    HttpResponse<byte[]> m = HTTP.send(
        HttpRequest.newBuilder(URI.create(base + "/v2/" + image.repository() + "/manifests/" + image.tag()))
            .header("Accept", ACCEPT).timeout(Duration.ofSeconds(30)).build(),
        HttpResponse.BodyHandlers.ofByteArray());
    assertThat(m.statusCode()).as("manifest %s:%s", image.repository(), image.tag()).isEqualTo(200);
    assertThat(Digest.sha256(m.body())).isEqualTo(image.manifest());
    for (Digest blob : image.blobs()) {
      HttpResponse<byte[]> b = HTTP.send(
          HttpRequest.newBuilder(URI.create(base + "/v2/" + image.repository() + "/blobs/" + blob))
              .timeout(Duration.ofSeconds(30)).build(),
          HttpResponse.BodyHandlers.ofByteArray());
      assertThat(b.statusCode()).as("blob %s", blob).isEqualTo(200);
      assertThat(Digest.sha256(b.body())).as("bytes of blob %s", blob).isEqualTo(blob);
    }
  }

  static HttpResponse<String> get(String url) throws IOException, InterruptedException {
    return HTTP.send(HttpRequest.newBuilder(URI.create(url)).timeout(Duration.ofSeconds(30)).build(),
        HttpResponse.BodyHandlers.ofString());
  }

  static HttpResponse<String> post(String url, String json) throws IOException, InterruptedException {
    return HTTP.send(
        HttpRequest.newBuilder(URI.create(url)).header("Content-Type", "application/json")
            .timeout(Duration.ofSeconds(30)).POST(HttpRequest.BodyPublishers.ofString(json)).build(),
        HttpResponse.BodyHandlers.ofString());
  }
}
