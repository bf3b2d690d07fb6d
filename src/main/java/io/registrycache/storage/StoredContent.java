package io.registrycache.storage;

import io.registrycache.oci.Digest;
import java.net.URI;
import java.nio.file.Path;
import java.util.Optional;
import org.springframework.core.io.buffer.DataBuffer;
import org.springframework.core.io.buffer.DataBufferFactory;
import org.springframework.core.io.buffer.DataBufferUtils;
import reactor.core.publisher.Flux;

/**
 * The reader side of a store: one stored, verified blob, to send whole or ranged. A store on a file
 * system also names the file ({@link #file}), so the HTTP layer can send it zero-copy; any other
 * store (an S3-API object store) streams {@link #read}.
 */
public interface StoredContent {

  /** The content's digest (its bytes were verified against it when stored). */
  Digest digest();

  /** Size in bytes. */
  long size();

  /**
   * Bytes {@code [start, start + count)} as buffers of at most 64 KiB; the subscriber releases
   * them. Reads lazily on the subscribing thread.
   */
  Flux<DataBuffer> read(long start, long count, DataBufferFactory factory);

  /** The file holding exactly these bytes, when the store is a file system; empty otherwise. */
  Optional<Path> file();

  /**
   * A URL a client may fetch exactly these bytes from itself, whole or ranged, instead of through
   * this service: a presigned GET of the object-store object, valid for {@code
   * storage.s3.presign-ttl}, when {@code storage.s3.redirect} is on; empty otherwise (the default).
   * Computed locally (a signature), no request to the store.
   */
  default Optional<URI> redirect() {
    return Optional.empty();
  }

  /** A stored file. */
  record File(Digest digest, Path path, long size) implements StoredContent {
    private static final int CHUNK = 64 * 1024;

    @Override
    public Flux<DataBuffer> read(long start, long count, DataBufferFactory factory) {
      Flux<DataBuffer> all = DataBufferUtils.read(path, factory, CHUNK);
      return DataBufferUtils.takeUntilByteCount(
          DataBufferUtils.skipUntilByteCount(all, start), count);
    }

    @Override
    public Optional<Path> file() {
      return Optional.of(path);
    }
  }
}
