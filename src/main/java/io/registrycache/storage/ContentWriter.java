package io.registrycache.storage;

import io.registrycache.oci.Digest;
import java.io.IOException;
import java.nio.ByteBuffer;

/**
 * The writer side of a store, the same for blobs and manifests: created for an expected digest
 * ({@code newWriter}), {@link #append} the bytes, then {@link #commit} — where the size and digest
 * are verified, so no caller can store unverified content — or {@link #abort}. Until the commit
 * nothing is visible in the store. One thread appends and commits.
 */
public interface ContentWriter {

  /** The digest the bytes must have. */
  Digest digest();

  /** Bytes appended so far. */
  long written();

  /** Appends all remaining bytes of {@code bytes}. Blocking. */
  void append(ByteBuffer bytes) throws IOException;

  /**
   * Verifies the bytes and makes them visible under their digest, atomically. Blocking.
   *
   * @param expectedSize the size the bytes must have, or -1 when unknown
   * @return the stored size in bytes
   * @throws ContentVerificationException when the size or digest does not match; nothing is
   *     stored (as by {@link #abort})
   * @throws IOException when the bytes cannot be stored; nothing is stored
   */
  long commit(long expectedSize) throws IOException;

  /** Drops what was written; the store is unchanged. Idempotent; a no-op after a commit. */
  void abort();
}
