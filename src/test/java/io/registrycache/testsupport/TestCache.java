package io.registrycache.testsupport;

import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import io.registrycache.config.RegistryCacheProperties;
import io.registrycache.oci.Digest;
import io.registrycache.oci.MediaType;
import io.registrycache.oci.Reference;
import io.registrycache.storage.CacheCollector;
import io.registrycache.storage.ContentWriter;
import io.registrycache.storage.FileBlobStore;
import io.registrycache.storage.ManifestStore;
import io.registrycache.storage.StorageLayout;
import io.registrycache.storage.StorageMetrics;
import io.registrycache.storage.StoredManifest;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.time.Duration;
import java.util.Map;
import java.util.Random;

/** A real cache over a temporary folder, with a clock the test moves. For unit tests. */
public final class TestCache implements AutoCloseable {

  /** A clock that only moves when told: {@link AdvancingClock} over the time it was made. */
  public static final class MutableClock extends AdvancingClock {
    public MutableClock() {
      this(System.currentTimeMillis());
    }

    private MutableClock(long start) {
      super(() -> start);
    }
  }

  public final MutableClock clock = new MutableClock();
  public final RegistryCacheProperties properties;
  public final SimpleMeterRegistry meters = new SimpleMeterRegistry();
  public final StorageLayout layout;
  public final FileBlobStore blobs;
  public final ManifestStore manifests;
  public final CacheCollector collector;
  private int seed;

  /**
   * @param maxBytes disk budget (0 = unlimited); watermarks 0.9 / 0.5
   */
  public TestCache(Path root, long maxBytes, Duration deleteGrace) {
    try {
      properties =
          RegistryCacheProperties.bind(
              Map.of(
                  "registry-cache.storage.path", root.toString(),
                  "registry-cache.storage.max-bytes", String.valueOf(maxBytes),
                  "registry-cache.storage.high-watermark", "0.9",
                  "registry-cache.storage.low-watermark", "0.5",
                  "registry-cache.storage.eviction-batch-size", "2"));
      layout = new StorageLayout(properties);
      blobs = new FileBlobStore(layout, clock, deleteGrace);
      manifests = new ManifestStore(layout, blobs, properties, clock);
      collector =
          new CacheCollector(
              blobs, manifests, new StorageMetrics(meters, blobs, manifests), properties);
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
  }

  /** Stores a random blob of {@code size} bytes, as a verified download would. */
  public Digest blob(int size) {
    byte[] content = new byte[size];
    new Random(++seed).nextBytes(content);
    Digest d = Digest.sha256(content);
    try {
      ContentWriter writer = blobs.newWriter(d);
      writer.append(ByteBuffer.wrap(content));
      writer.commit(size);
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
    return d;
  }

  /** Stores an image manifest whose config is {@code config} and layers {@code layers}. */
  public Digest manifest(Digest config, Digest... layers) {
    StringBuilder json =
        new StringBuilder(
                "{\"schemaVersion\":2,\"mediaType\":\"application/vnd.oci.image.manifest.v1+json\",")
            .append(
                "\"config\":{\"mediaType\":\"application/vnd.oci.image.config.v1+json\",\"digest\":\"")
            .append(config)
            .append("\",\"size\":1},\"layers\":[");
    for (int i = 0; i < layers.length; i++) {
      json.append(i > 0 ? "," : "")
          .append("{\"mediaType\":\"application/vnd.oci.image.layer.v1.tar+gzip\",\"digest\":\"")
          .append(layers[i])
          .append("\",\"size\":1}");
    }
    json.append("]}");
    byte[] body = json.toString().getBytes(StandardCharsets.UTF_8);
    Digest d = Digest.sha256(body);
    manifests.put(
        new StoredManifest(d, MediaType.parse("application/vnd.oci.image.manifest.v1+json"), body));
    return d;
  }

  /** Stores an index of the given manifests, each for platform {@code linux/arch<i>}. */
  public Digest index(Digest... children) {
    StringBuilder json =
        new StringBuilder(
            "{\"schemaVersion\":2,\"mediaType\":\"application/vnd.oci.image.index.v1+json\",\"manifests\":[");
    for (int i = 0; i < children.length; i++) {
      json.append(i > 0 ? "," : "")
          .append("{\"mediaType\":\"application/vnd.oci.image.manifest.v1+json\",\"digest\":\"")
          .append(children[i])
          .append("\",\"size\":1,\"platform\":{\"os\":\"linux\",\"architecture\":\"arch")
          .append(i)
          .append("\"}}");
    }
    json.append("]}");
    byte[] body = json.toString().getBytes(StandardCharsets.UTF_8);
    Digest d = Digest.sha256(body);
    manifests.put(
        new StoredManifest(d, MediaType.parse("application/vnd.oci.image.index.v1+json"), body));
    return d;
  }

  /** Links {@code upstream/repository:tag} to {@code manifest}. */
  public void tag(String upstream, String repository, String tag, Digest manifest) {
    manifests.putTag(upstream, repository, new Reference.Tag(tag), manifest, clock.instant());
  }

  /** A client pull of a manifest (through the store's read path). */
  public void pullManifest(Digest manifest) {
    manifests.find(manifest).orElseThrow();
  }

  /** A client pull of a blob. */
  public void pullBlob(Digest blob) {
    blobs.lookup(blob).orElseThrow();
  }

  public long total() {
    return blobs.bytes() + manifests.bytes();
  }

  @Override
  public void close() {
    blobs.close();
  }
}
