package io.registrycache.startup;

import io.netty.buffer.Unpooled;
import io.registrycache.oci.Digest;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Random;
import org.reactivestreams.Publisher;
import reactor.core.publisher.Mono;
import reactor.netty.DisposableServer;
import reactor.netty.http.server.HttpServer;
import reactor.netty.http.server.HttpServerResponse;

/**
 * The synthetic upstream the AOT cache's training run ({@link AotTraining}) and the start-up
 * warm-up ({@link StartupWarmUp}) pull through, so that the code of a cold pull (the upstream
 * client, the download, the store's writes, the manifest parse) runs before any client's pull.
 *
 * <p>A Reactor Netty server on {@code 127.0.0.1:<port>} (the library the service serves with, so it
 * adds no classes of its own), answering {@code GET}/{@code HEAD} of {@code /v2/}, of {@link
 * #REPOSITORY}'s manifests ({@link #tag}{@code (i)}, OCI image manifests) and of their config and
 * layer blobs, every blob different. Everything else: 404.
 */
final class TrainingUpstream implements AutoCloseable {

  /** The repository of the synthetic images. */
  static final String REPOSITORY = "training/app";

  /** The tag of the first synthetic image. */
  static final String TAG = "latest";

  /** Size of the training start's larger layer, bytes: over one write batch of a fill (1 MiB). */
  static final int LARGE_LAYER_BYTES = 3 << 20;

  private static final String MANIFEST_TYPE = "application/vnd.oci.image.manifest.v1+json";

  private final Map<String, byte[]> blobs = new LinkedHashMap<>();
  private final List<List<String>> imageBlobs = new ArrayList<>();
  private final Map<String, byte[]> manifests = new HashMap<>();
  private final DisposableServer server;

  private TrainingUpstream(int port, int images, int[] layerBytes) {
    Random random = new Random(port);
    for (int i = 0; i < images; i++) {
      byte[] config =
          ("{\"architecture\":\"amd64\",\"os\":\"linux\",\"rootfs\":{\"type\":\"layers\",\"diff_ids\":[]},"
                  + "\"config\":{\"Labels\":{\"image\":\""
                  + i
                  + "\"}}}")
              .getBytes(StandardCharsets.UTF_8);
      List<String> digests = new ArrayList<>();
      String configDigest = put(config);
      digests.add(configDigest);
      StringBuilder layers = new StringBuilder();
      for (int size : layerBytes) {
        byte[] layer = new byte[size];
        random.nextBytes(layer);
        String digest = put(layer);
        digests.add(digest);
        layers
            .append(layers.isEmpty() ? "" : ",")
            .append(
                descriptor("application/vnd.oci.image.layer.v1.tar+gzip", digest, layer.length));
      }
      imageBlobs.add(List.copyOf(digests));
      manifests.put(
          tag(i),
          ("{\"schemaVersion\":2,\"mediaType\":\""
                  + MANIFEST_TYPE
                  + "\",\"config\":"
                  + descriptor(
                      "application/vnd.oci.image.config.v1+json", configDigest, config.length)
                  + ",\"layers\":["
                  + layers
                  + "]}")
              .getBytes(StandardCharsets.UTF_8));
    }
    String manifestPrefix = "/v2/" + REPOSITORY + "/manifests/";
    String blobPrefix = "/v2/" + REPOSITORY + "/blobs/";
    server =
        HttpServer.create()
            .host("127.0.0.1")
            .port(port)
            .route(
                routes ->
                    routes
                        .route(
                            r -> r.uri().equals("/v2/") || r.uri().equals("/v2"),
                            (req, res) -> res.status(200).send())
                        .route(
                            r -> r.uri().startsWith(manifestPrefix),
                            (req, res) -> {
                              byte[] manifest =
                                  manifests.get(req.uri().substring(manifestPrefix.length()));
                              return manifest == null
                                  ? res.status(404).send()
                                  : body(
                                      res.header("Content-Type", MANIFEST_TYPE)
                                          .header(
                                              "Docker-Content-Digest",
                                              Digest.sha256(manifest).toString()),
                                      req.method().name(),
                                      manifest);
                            })
                        .route(
                            r -> r.uri().startsWith(blobPrefix),
                            (req, res) -> {
                              byte[] blob = blobs.get(req.uri().substring(blobPrefix.length()));
                              return blob == null
                                  ? res.status(404).send()
                                  : body(
                                      res.header("Content-Type", "application/octet-stream"),
                                      req.method().name(),
                                      blob);
                            }))
            .bindNow();
  }

  /**
   * Starts an upstream of one image on {@code 127.0.0.1:port} (0: a free port): {@link #TAG}, a
   * config, a 4 KiB layer and one of {@value #LARGE_LAYER_BYTES} bytes that takes a fill through
   * more than one write batch.
   *
   * @throws RuntimeException when the port cannot be bound
   */
  static TrainingUpstream start(int port) {
    return new TrainingUpstream(port, 1, new int[] {4096, LARGE_LAYER_BYTES});
  }

  /**
   * Starts an upstream of {@code images} images on {@code 127.0.0.1:port} (0: a free port), each a
   * config and one layer of each of {@code layerBytes} bytes, every blob different.
   *
   * @throws RuntimeException when the port cannot be bound
   */
  static TrainingUpstream start(int port, int images, int... layerBytes) {
    return new TrainingUpstream(port, images, layerBytes);
  }

  /** The tag of image {@code i}: {@link #TAG} for the first, {@code latest-<i>} for the others. */
  static String tag(int i) {
    return i == 0 ? TAG : TAG + "-" + i;
  }

  /** The port it listens on. */
  int port() {
    return server.port();
  }

  /**
   * The digests of image {@code i}'s blobs (config first, then the layers), as {@code
   * sha256:<hex>}.
   */
  List<String> blobDigests(int i) {
    return imageBlobs.get(i);
  }

  /**
   * The digests of the first image's blobs (config first, then the layers), as {@code
   * sha256:<hex>}.
   */
  List<String> blobDigests() {
    return blobDigests(0);
  }

  private String put(byte[] blob) {
    String digest = Digest.sha256(blob).toString();
    blobs.put(digest, blob);
    return digest;
  }

  private static String descriptor(String mediaType, String digest, long size) {
    return "{\"mediaType\":\""
        + mediaType
        + "\",\"digest\":\""
        + digest
        + "\",\"size\":"
        + size
        + "}";
  }

  private static Publisher<Void> body(HttpServerResponse res, String method, byte[] bytes) {
    res.header("Content-Length", Integer.toString(bytes.length));
    return "HEAD".equals(method) ? res.send() : res.send(Mono.just(Unpooled.wrappedBuffer(bytes)));
  }

  @Override
  public void close() {
    server.disposeNow();
  }
}
