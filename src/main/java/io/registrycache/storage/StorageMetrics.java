package io.registrycache.storage;

import io.micrometer.core.instrument.Counter;
import io.micrometer.core.instrument.Gauge;
import io.micrometer.core.instrument.MeterRegistry;
import org.springframework.stereotype.Component;

/**
 * The stores' figures, exported at {@code /actuator/prometheus}:
 *
 * <ul>
 *   <li>{@code registry_cache_stored_items{kind}}, {@code registry_cache_stored_bytes{kind}} — kind
 *       {@code manifest|blob}
 *   <li>{@code registry_cache_evictions_total{kind,reason}}, {@code
 *       registry_cache_evicted_bytes_total{kind,reason}} — items and bytes removed, kind {@code
 *       manifest|blob}, reason {@code budget|prune|evict}
 * </ul>
 */
@Component
public class StorageMetrics {

  private final MeterRegistry registry;

  public StorageMetrics(MeterRegistry registry, BlobStore blobs, ManifestStore manifests) {
    this.registry = registry;
    Gauge.builder("registry.cache.stored.items", blobs, BlobStore::count)
        .tag("kind", "blob")
        .description("Items stored in the cache")
        .register(registry);
    Gauge.builder("registry.cache.stored.items", manifests, ManifestStore::count)
        .tag("kind", "manifest")
        .description("Items stored in the cache")
        .register(registry);
    Gauge.builder("registry.cache.stored.bytes", blobs, BlobStore::bytes)
        .tag("kind", "blob")
        .baseUnit("bytes")
        .description("Bytes stored in the cache")
        .register(registry);
    Gauge.builder("registry.cache.stored.bytes", manifests, ManifestStore::bytes)
        .tag("kind", "manifest")
        .baseUnit("bytes")
        .description("Bytes stored in the cache")
        .register(registry);
  }

  /** Counts one item removed from the cache and its bytes. */
  public void evicted(String kind, String reason, long bytes) {
    registry.counter("registry.cache.evictions", "kind", kind, "reason", reason).increment();
    Counter.builder("registry.cache.evicted.bytes")
        .baseUnit("bytes")
        .tag("kind", kind)
        .tag("reason", reason)
        .description("Bytes removed from the cache")
        .register(registry)
        .increment((double) bytes);
  }
}
