package io.registrycache.proxy;

import io.registrycache.oci.Digest;
import io.registrycache.storage.BlobDownload;
import java.nio.file.Path;

/** Where the bytes of a requested blob come from. */
public sealed interface BlobSource permits BlobSource.Stored, BlobSource.Downloading {

  /** The blob's digest. */
  Digest digest();

  /**
   * A verified blob on disk: served with zero-copy file transfer.
   *
   * @param size bytes
   */
  record Stored(Digest digest, Path path, long size) implements BlobSource {}

  /**
   * A blob still arriving from the upstream: served by tailing the download.
   *
   * @param size bytes as the upstream announced them, or -1 when unknown
   */
  record Downloading(Digest digest, BlobDownload download, long size) implements BlobSource {}
}
