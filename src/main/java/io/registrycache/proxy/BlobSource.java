package io.registrycache.proxy;

import io.registrycache.oci.Digest;

import java.nio.file.Path;

/** Where the bytes of a requested blob come from. */
public sealed interface BlobSource permits BlobSource.Stored, BlobSource.Downloading {

  /** The blob's digest. */
  Digest digest();

  /** The blob's size in bytes; -1 while downloading when the upstream did not announce it. */
  long size();

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
