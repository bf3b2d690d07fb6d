package io.registrycache.proxy;

import io.registrycache.metrics.CacheMetrics;
import io.registrycache.oci.Digest;
import io.registrycache.oci.MediaType;
import io.registrycache.storage.StoredManifest;

/**
 * A manifest to send to a client, and how the cache came by it.
 *
 * @param manifest the manifest, bytes exactly as the upstream sent them
 * @param result {@code HIT}, {@code MISS} or {@code STALE}
 */
public record ManifestResult(StoredManifest manifest, CacheMetrics.Result result) {

  /** The manifest's digest (its bytes were checked against it). */
  public Digest digest() {
    return manifest.digest();
  }

  /** The manifest's media type, as stored. */
  public MediaType mediaType() {
    return manifest.mediaType();
  }

  /** The manifest's bytes, exactly as the upstream sent them. */
  public byte[] body() {
    return manifest.body();
  }
}
