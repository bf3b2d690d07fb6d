package io.registrycache.config;

import java.nio.file.Path;
import java.time.Duration;
import org.springframework.boot.context.properties.ConfigurationProperties;
import org.springframework.boot.context.properties.bind.DefaultValue;

/**
 * {@code registry-cache.storage.*}: where the cache keeps manifests, tags and blobs, and its disk
 * budget (docs/operations.md, "Disk budget"). The S3-API settings ({@code storage.s3.*}) are bound
 * with the S3 store.
 *
 * @param type the store: {@code filesystem} (the default: blobs and manifests under {@code path})
 *     or {@code s3} (an S3-API bucket shared by replicas, {@code storage.s3.*}); any other value
 *     fails the start-up
 * @param path root folder of the cache; created when missing; default {@code ./data}
 * @param maxBytes disk budget in bytes for stored blobs and manifests; 0 (the default) means
 *     unlimited (no eviction). Downloads in flight and files waiting out {@code delete-grace} are
 *     not counted
 * @param highWatermark fraction of {@code max-bytes} above which the least recently pulled content
 *     is evicted; default 0.90
 * @param lowWatermark fraction of {@code max-bytes} that eviction brings the stored bytes down to;
 *     default 0.80
 * @param janitorInterval how often the storage janitor checks the budget and records access times
 *     on disk (it also runs as soon as a stored blob takes the cache over the high watermark);
 *     default 30 s
 * @param evictionBatchSize how many items the janitor evicts before it measures again; default 100
 * @param deleteGrace how long an evicted blob's file stays on disk after it left the index, so a
 *     request that looked it up just before can still open it; default 30 s
 * @param contentScope where a stored blob or manifest may be served by digest; default {@code
 *     repository} (docs/security.md)
 */
@ConfigurationProperties("registry-cache.storage")
public record StorageProperties(
    @DefaultValue("filesystem") Type type,
    @DefaultValue("./data") Path path,
    @DefaultValue("0") long maxBytes,
    @DefaultValue("0.90") double highWatermark,
    @DefaultValue("0.80") double lowWatermark,
    @DefaultValue("30s") Duration janitorInterval,
    @DefaultValue("100") int evictionBatchSize,
    @DefaultValue("30s") Duration deleteGrace,
    @DefaultValue("repository") ContentScope contentScope) {

  /** Where blobs and manifests are kept. */
  public enum Type {
    /** Under {@code storage.path} on the local file system. */
    FILESYSTEM,
    /** In an S3-API bucket ({@code storage.s3.*}), shared by replicas. */
    S3
  }

  public StorageProperties {
    if (maxBytes < 0 || lowWatermark <= 0 || highWatermark > 1 || lowWatermark > highWatermark) {
      throw new IllegalArgumentException(
          "registry-cache.storage: need max-bytes >= 0 and 0 < low-watermark <= high-watermark <= 1");
    }
  }
}
