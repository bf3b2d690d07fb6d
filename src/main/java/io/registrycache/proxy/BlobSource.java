package io.registrycache.proxy;

import io.registrycache.oci.Digest;
import io.registrycache.storage.StoredContent;
import java.net.URI;
import java.nio.file.Path;
import java.util.Optional;
import org.springframework.core.io.buffer.DataBuffer;
import org.springframework.core.io.buffer.DataBufferFactory;
import reactor.core.publisher.Flux;
import reactor.core.publisher.Mono;

/**
 * A blob's body as the HTTP layer sends it, whether stored or still arriving: its size, its bytes
 * (whole, or a range once it is {@link #complete}), and where a store lets it go out without
 * passing through this service (a file for {@code sendfile}, a URL to redirect to).
 */
public sealed interface BlobSource permits BlobSource.Stored, BlobSource.Downloading {

  /** The blob's digest. */
  Digest digest();

  /** The blob's size in bytes; -1 while downloading when the upstream did not announce it. */
  long size();

  /** Whether every byte is verified and stored, so any range of it can be served. */
  boolean complete();

  /** Whether this request found the blob stored without fetching it (a hit). */
  boolean hit();

  /**
   * Bytes {@code [start, start + count)} ({@code count} -1: to the end) as buffers of {@code
   * factory}; the subscriber releases them. Of a blob still arriving: as they arrive, the last byte
   * once the whole blob is verified (a bad blob ends in an error, never a clean end).
   */
  Flux<DataBuffer> read(long start, long count, DataBufferFactory factory);

  /** The file holding exactly these bytes, to send zero-copy; empty unless stored in a file. */
  default Optional<Path> file() {
    return Optional.empty();
  }

  /**
   * A URL the client may fetch these bytes from itself ({@code storage.s3.redirect}); usually
   * empty.
   */
  default Optional<URI> redirect() {
    return Optional.empty();
  }

  /**
   * A verified, stored blob: served zero-copy when the store names its file.
   *
   * @param content the store's reader of it
   * @param fetched whether this request fetched it from the upstream (waited for its download, or
   *     found it prefetched for this pull): not a hit
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

    @Override
    public boolean complete() {
      return true;
    }

    @Override
    public boolean hit() {
      return !fetched;
    }

    @Override
    public Flux<DataBuffer> read(long start, long count, DataBufferFactory factory) {
      return content.read(start, count < 0 ? content.size() - start : count, factory);
    }

    @Override
    public Optional<Path> file() {
      return content.file();
    }

    @Override
    public Optional<URI> redirect() {
      return content.redirect();
    }
  }

  /**
   * A blob still arriving from the upstream: served from the download as it arrives.
   *
   * @param size bytes as the upstream announced them, or -1 when unknown
   * @param stored completes with the size once the blob is verified, stored and linked here; errors
   *     when the download failed
   */
  record Downloading(Digest digest, BlobDownload download, long size, Mono<Long> stored)
      implements BlobSource {
    @Override
    public boolean complete() {
      return false;
    }

    @Override
    public boolean hit() {
      return false;
    }

    @Override
    public Flux<DataBuffer> read(long start, long count, DataBufferFactory factory) {
      return download.read(start, count < 0 ? -1 : start + count - 1, factory);
    }
  }
}
