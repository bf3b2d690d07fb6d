package io.registrycache.admin;

import io.netty.buffer.Unpooled;
import io.registrycache.oci.Digest;
import java.nio.charset.StandardCharsets;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Random;
import reactor.core.publisher.Mono;
import reactor.netty.DisposableServer;
import reactor.netty.http.server.HttpServer;

/**
 * The upstream a class-data training start pulls one synthetic image through, so that the
 * archive holds the classes of a cold pull (the upstream client, the download, the store's
 * writes, the manifest parse), not only those of the router and the 404 path: a first cold
 * request after a start then loads them from the archive instead of from the jar.
 *
 * <p>A Reactor Netty server on {@code 127.0.0.1:<port>} (the library the service serves with, so
 * it adds no classes of its own), answering {@code GET}/{@code HEAD} of {@code /v2/}, of {@link
 * #REPOSITORY}'s manifest {@code latest} (an OCI image manifest) and of its config and layer
 * blobs: one small layer, and one of {@value #LARGE_LAYER_BYTES} bytes that takes a fill through
 * more than one write batch. Everything else: 404.
 */
final class TrainingUpstream implements AutoCloseable {

  /** The repository of the synthetic image. */
  static final String REPOSITORY = "training/app";
  /** The tag of the synthetic image. */
  static final String TAG = "latest";
  /** Size of the larger layer, bytes: over one write batch of a fill (1 MiB). */
  static final int LARGE_LAYER_BYTES = 3 << 20;

  private static final String MANIFEST_TYPE = "application/vnd.oci.image.manifest.v1+json";

  private final Map<String, byte[]> blobs = new LinkedHashMap<>();
  private final byte[] manifest;
  private final DisposableServer server;

  private TrainingUpstream(int port) {
    Random random = new Random(port);
    byte[] small = new byte[4096];
    byte[] large = new byte[LARGE_LAYER_BYTES];
    random.nextBytes(small);
    random.nextBytes(large);
    byte[] config = "{\"architecture\":\"amd64\",\"os\":\"linux\",\"rootfs\":{\"type\":\"layers\",\"diff_ids\":[]}}"
        .getBytes(StandardCharsets.UTF_8);
    String configDigest = put(config);
    StringBuilder layers = new StringBuilder();
    for (byte[] layer : List.of(small, large)) {
      layers.append(layers.isEmpty() ? "" : ",")
          .append(descriptor("application/vnd.oci.image.layer.v1.tar+gzip", put(layer), layer.length));
    }
    manifest = ("{\"schemaVersion\":2,\"mediaType\":\"" + MANIFEST_TYPE + "\",\"config\":"
        + descriptor("application/vnd.oci.image.config.v1+json", configDigest, config.length)
        + ",\"layers\":[" + layers + "]}").getBytes(StandardCharsets.UTF_8);
    server = HttpServer.create()
        .host("127.0.0.1")
        .port(port)
        .route(routes -> routes
            .route(r -> r.uri().equals("/v2/") || r.uri().equals("/v2"), (req, res) -> res.status(200).send())
            .route(r -> r.uri().equals("/v2/" + REPOSITORY + "/manifests/" + TAG),
                (req, res) -> body(res.header("Content-Type", MANIFEST_TYPE)
                    .header("Docker-Content-Digest", Digest.sha256(manifest).toString()), req.method().name(), manifest))
            .route(r -> r.uri().startsWith("/v2/" + REPOSITORY + "/blobs/"), (req, res) -> {
              byte[] blob = blobs.get(req.uri().substring(("/v2/" + REPOSITORY + "/blobs/").length()));
              return blob == null
                  ? res.status(404).send()
                  : body(res.header("Content-Type", "application/octet-stream"), req.method().name(), blob);
            }))
        .bindNow();
  }

  /**
   * Starts the upstream on {@code 127.0.0.1:port}.
   *
   * @throws RuntimeException when the port cannot be bound
   */
  static TrainingUpstream start(int port) {
    return new TrainingUpstream(port);
  }

  /** The digests of the image's blobs (config first, then the layers), as {@code sha256:<hex>}. */
  List<String> blobDigests() {
    return List.copyOf(blobs.keySet());
  }

  private String put(byte[] blob) {
    String digest = Digest.sha256(blob).toString();
    blobs.put(digest, blob);
    return digest;
  }

  private static String descriptor(String mediaType, String digest, long size) {
    return "{\"mediaType\":\"" + mediaType + "\",\"digest\":\"" + digest + "\",\"size\":" + size + "}";
  }

  private static org.reactivestreams.Publisher<Void> body(
      reactor.netty.http.server.HttpServerResponse res, String method, byte[] bytes) {
    res.header("Content-Length", Integer.toString(bytes.length));
    return "HEAD".equals(method) ? res.send() : res.send(Mono.just(Unpooled.wrappedBuffer(bytes)));
  }

  @Override
  public void close() {
    server.disposeNow();
  }
}
