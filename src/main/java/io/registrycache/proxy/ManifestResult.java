package io.registrycache.proxy;

import io.registrycache.metrics.CacheMetrics;
import io.registrycache.storage.StoredManifest;

/**
 * A manifest to send to a client, and how the cache came by it.
 *
 * @param manifest the manifest, bytes exactly as the upstream sent them
 * @param result {@code HIT}, {@code MISS} or {@code STALE}
 */
public record ManifestResult(StoredManifest manifest, CacheMetrics.Result result) {}
