package io.registrycache.upstream;

import io.registrycache.config.RegistryCacheProperties;
import io.registrycache.oci.Digest;
import io.registrycache.oci.MediaTypes;
import java.io.IOException;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.util.Base64;
import java.util.Random;
import java.util.Set;
import java.util.function.Consumer;

/**
 * Pushes test content into a real registry over HTTP (OCI Distribution Spec v1.1, "Push":
 * monolithic upload {@code POST} then {@code PUT ...&digest=}, then {@code PUT} of the manifest).
 * Private to this package on purpose: no dependency on shared fixtures.
 */
final class TestRegistry {

  private final HttpClient http = HttpClient.newHttpClient();
  private final String baseUrl;
  private final String authorization;

  TestRegistry(String baseUrl, String username, String password) {
    this.baseUrl = baseUrl;
    this.authorization =
        username == null
            ? null
            : "Basic " + Base64.getEncoder().encodeToString((username + ":" + password).getBytes(StandardCharsets.UTF_8));
  }

  /** Pushed image: its manifest bytes and digests. */
  record Image(byte[] manifest, Digest manifestDigest, byte[] config, Digest configDigest, byte[] layer, Digest layerDigest) {}

  /** Pushes a config, one random layer of {@code layerSize} bytes, and an OCI manifest under {@code tag}. */
  Image pushImage(String name, String tag, int layerSize, long seed) throws Exception {
    byte[] config = ("{\"architecture\":\"amd64\",\"os\":\"linux\",\"seed\":" + seed + "}").getBytes(StandardCharsets.UTF_8);
    byte[] layer = new byte[layerSize];
    new Random(seed).nextBytes(layer);
    Digest configDigest = pushBlob(name, config);
    Digest layerDigest = pushBlob(name, layer);
    // Unusual spacing and key order on purpose: re-serializing would change the digest.
    String manifest =
        "{\n   \"schemaVersion\": 2,\n\t\"mediaType\": \"" + MediaTypes.OCI_MANIFEST + "\",\n"
            + "  \"config\": {\"mediaType\": \"application/vnd.oci.image.config.v1+json\", \"size\": " + config.length
            + ", \"digest\": \"" + configDigest + "\"},\n"
            + "  \"layers\": [ {\"mediaType\": \"application/vnd.oci.image.layer.v1.tar\", \"size\": " + layer.length
            + ", \"digest\": \"" + layerDigest + "\"} ],\n"
            + "  \"annotations\": {\"z\": \"last\", \"a\": \"first \\u00e9\"}\n}\n";
    byte[] manifestBytes = manifest.getBytes(StandardCharsets.UTF_8);
    Digest manifestDigest = pushManifest(name, tag, manifestBytes, MediaTypes.OCI_MANIFEST);
    return new Image(manifestBytes, manifestDigest, config, configDigest, layer, layerDigest);
  }

  Digest pushBlob(String name, byte[] content) throws Exception {
    Digest digest = Digest.sha256(content);
    HttpResponse<String> start =
        send(request(URI.create(baseUrl + "/v2/" + name + "/blobs/uploads/")).POST(HttpRequest.BodyPublishers.noBody()));
    expect(start, 202, "start upload");
    String location = start.headers().firstValue("Location").orElseThrow();
    URI uploadUri = URI.create(baseUrl).resolve(location);
    String separator = uploadUri.getQuery() == null ? "?" : "&";
    HttpResponse<String> put =
        send(request(URI.create(uploadUri + separator + "digest=" + digest))
            .header("Content-Type", "application/octet-stream")
            .PUT(HttpRequest.BodyPublishers.ofByteArray(content)));
    expect(put, 201, "finish upload");
    return digest;
  }

  Digest pushManifest(String name, String tag, byte[] manifest, String mediaType) throws Exception {
    HttpResponse<String> put =
        send(request(URI.create(baseUrl + "/v2/" + name + "/manifests/" + tag))
            .header("Content-Type", mediaType)
            .PUT(HttpRequest.BodyPublishers.ofByteArray(manifest)));
    expect(put, 201, "put manifest");
    return Digest.sha256(manifest);
  }

  private HttpRequest.Builder request(URI uri) {
    HttpRequest.Builder builder = HttpRequest.newBuilder(uri);
    if (authorization != null) {
      builder.header("Authorization", authorization);
    }
    return builder;
  }

  private HttpResponse<String> send(HttpRequest.Builder request) throws IOException, InterruptedException {
    return http.send(request.build(), HttpResponse.BodyHandlers.ofString());
  }

  private static void expect(HttpResponse<String> response, int status, String step) {
    if (response.statusCode() != status) {
      throw new IllegalStateException(step + ": " + response.statusCode() + " " + response.body());
    }
  }

  /** An {@link Upstream} for tests. */
  static Upstream upstream(String key, String url, Consumer<RegistryCacheProperties.Upstream> customize) {
    RegistryCacheProperties.Upstream settings = new RegistryCacheProperties.Upstream();
    settings.setUrl(url);
    URI uri = URI.create(url);
    settings.setHost(uri.getAuthority());
    customize.accept(settings);
    return new Upstream(key, uri.getAuthority(), uri, Set.of(), false, settings);
  }
}
