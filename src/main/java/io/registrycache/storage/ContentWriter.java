package io.registrycache.storage;

import io.registrycache.oci.Digest;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.channels.SeekableByteChannel;

/**
 * A writer of one blob ({@link BlobStore#newWriter}): created for an expected digest, {@link
 * #append} the bytes, then {@link #commit} — where the size and digest are verified, so no caller
 * can store unverified content — or {@link #abort}. Until the commit nothing is visible in the
 * store. Readers can tail it while it is written ({@link #openReader}): the bytes so far, and the
 * same bytes once committed. One thread appends and commits.
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
   * @throws ContentVerificationException when the size or digest does not match; nothing is stored
   *     (as by {@link #abort})
   * @throws IOException when the bytes cannot be stored; nothing is stored
   */
  long commit(long expectedSize) throws IOException;

  /** Drops what was written; the store is unchanged. Idempotent; a no-op after a commit. */
  void abort();

  /**
   * Appends all remaining bytes of {@code bytes}, in order: one gathering write where the writer
   * has a file. Blocking.
   */
  default void append(ByteBuffer[] bytes) throws IOException {
    for (ByteBuffer b : bytes) {
      append(b);
    }
  }

  /**
   * Makes sure {@code size} more bytes fit where this writer writes, before any of them is handed
   * to a reader: a blob that cannot be stored fails at once, with a clean error to its clients,
   * rather than part-way. A store with no such limit does nothing.
   *
   * @throws IOException "No space left on device" when they do not fit
   */
  default void reserve(long size) throws IOException {}

  /**
   * A channel reading the bytes written so far and those written later.
   *
   * @throws java.nio.file.NoSuchFileException when the writer was aborted
   */
  SeekableByteChannel openReader() throws IOException;

  /**
   * Checks the size and digest of the bytes appended so far, once all are in, without storing them:
   * readers may be given the last byte from here on, before the (slower) {@link #commit} forces and
   * stores them. {@link #commit} verifies by itself when this was not called. Blocking (hashing is
   * done while appending; this compares).
   *
   * @param expectedSize the size the bytes must have, or -1 when unknown
   * @return the verified size in bytes
   * @throws ContentVerificationException when the size or digest does not match; the bytes are
   *     dropped (as by {@link #abort})
   */
  long verify(long expectedSize);

  /**
   * For a writer made by {@link BlobStore#newWriter(Digest, boolean, String, String)} behind an
   * owner: the owner gave up (unreachable, an error, its body broke off, so the bytes come from the
   * upstream here): store them as a plain writer does, without waiting for an owner's copy. No-op
   * for other writers.
   */
  default void ownerGaveUp() {}
}
