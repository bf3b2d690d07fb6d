package io.registrycache.proxy;

import io.registrycache.oci.Digest;
import io.registrycache.storage.StoredContent;

/** Where the bytes of a requested blob come from. */
public sealed interface BlobSource permits BlobSource.Stored, BlobSource.Downloading {

  /** The blob's digest. */
  Digest digest();

  /** The blob's size in bytes; -1 while downloading when the upstream did not announce it. */
  long size();

  /**
   * A verified, stored blob: served zero-copy when the store names its file.
   *
   * @param content the store's reader of it
   * @param fetched whether this request fetched it from the upstream (waited for its download)
   */
  record Stored(StoredContent content, boolean fetched) implements BlobSource {
    /** A blob that was already stored: a hit. */
    public Stored(StoredContent content) {
      this(content, false);
    }

    @Override
    public Digest digest() {
      return content.digest();
    }

    @Override
    public long size() {
      return content.size();
    }
  }

  /**
   * A blob still arriving from the upstream: served from the download as it arrives.
   *
   * @param size bytes as the upstream announced them, or -1 when unknown
   * @param stored completes with the size once the blob is verified, stored and linked here;
   *     errors when the download failed
   */
  record Downloading(Digest digest, BlobDownload download, long size, reactor.core.publisher.Mono<Long> stored)
      implements BlobSource {}
}
