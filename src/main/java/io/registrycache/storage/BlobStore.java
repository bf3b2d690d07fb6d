package io.registrycache.storage;

import io.registrycache.oci.Digest;
import java.io.IOException;
import java.nio.channels.SeekableByteChannel;
import java.time.Instant;
import java.util.List;
import java.util.Optional;

/**
 * Blobs, content-addressed: the seam a second store (an S3-API object store) plugs into; {@link
 * FileBlobStore} is the file-system one. Reading: {@link #lookup} / {@link #open} (the hit path,
 * recording a pull), {@link #size} (no pull recorded). Writing: {@link #newWriter} → {@link
 * Writer#append} → {@link Writer#commit}(expected size), which verifies size and digest, or
 * {@link Writer#abort}. Where a stored blob may be served: {@link #links}.
 */
public interface BlobStore extends AutoCloseable {

  /** One stored blob, as the index knows it. */
  final class Entry extends StoredItem {
    /** An entry; {@code lastPulledMillis} is also taken as already persisted. */
    public Entry(long size, long createdMillis, long lastPulledMillis) {
      super(size, createdMillis, lastPulledMillis);
    }
  }

  /**
   * A stored blob as reported to operators.
   *
   * @param digest the blob's digest
   * @param size bytes
   * @param created when it was stored
   * @param lastPulled when a client last pulled it or a manifest referencing it
   */
  record BlobInfo(Digest digest, long size, Instant created, Instant lastPulled) {}

  /**
   * A writer of one blob ({@link ContentWriter}) that readers can tail while it is written: the
   * bytes so far, and the same bytes once committed.
   */
  interface Writer extends ContentWriter {
    /**
     * Appends all remaining bytes of {@code bytes}, in order: one gathering write where the
     * writer has a file. Blocking.
     */
    default void append(java.nio.ByteBuffer[] bytes) throws IOException {
      for (java.nio.ByteBuffer b : bytes) {
        append(b);
      }
    }

    /**
     * Makes sure {@code size} more bytes fit where this writer writes, before any of them is
     * handed to a reader: a blob that cannot be stored fails at once, with a clean error to its
     * clients, rather than part-way. A store with no such limit does nothing.
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
     * Checks the size and digest of the bytes appended so far, once all are in, without storing
     * them: readers may be given the last byte from here on, before the (slower) {@link #commit}
     * forces and stores them. {@link #commit} verifies by itself when this was not called.
     * Blocking (hashing is done while appending; this compares).
     *
     * @param expectedSize the size the bytes must have, or -1 when unknown
     * @return the verified size in bytes
     * @throws ContentVerificationException when the size or digest does not match; the bytes
     *     are dropped (as by {@link #abort})
     */
    long verify(long expectedSize);

    /**
     * For a writer made by {@link #newWriterBehindOwner}: the owner gave up (unreachable, an error,
     * its body broke off, so the bytes come from the upstream here): store them as a plain writer
     * does, without waiting for an owner's copy. No-op for other writers.
     */
    default void ownerGaveUp() {}

    /**
     * Runs {@code action} in {@link #commit} once the bytes are verified and before the blob
     * becomes visible in the store (before the object store's upload completes, before the file
     * is moved into place), on the committing thread; blocking work is allowed. The pull path
     * links the blob to its repository there, so a replica sharing the store that sees the blob
     * sees its link too ({@link ContentLinks}). An exception from {@code action} is logged and the
     * commit goes on. Call before {@link #commit}; the last call wins. No-op by default.
     */
    default void beforeVisible(Runnable action) {}
  }

  /** Size in bytes of a stored (verified, complete) blob, if it is stored. Records no access. */
  Optional<Long> size(Digest digest);

  /**
   * Whether blob {@code digest} is stored, asking the store itself rather than this replica's
   * index: a store shared by replicas (the S3-API store) may hold a blob another replica stored
   * since the index was last brought up to date, and then adds it to the index. A store of this
   * replica alone answers from its index ({@link #size}).
   *
   * @return {@code true} when stored (and now indexed); {@code false} when not, or when the store
   *     cannot be asked (the caller fills the blob as a miss)
   */
  default reactor.core.publisher.Mono<Boolean> recheck(Digest digest) {
    return reactor.core.publisher.Mono.fromSupplier(() -> size(digest).isPresent());
  }

  /** Size in bytes of a stored blob, recording a pull of it now. Memory only. */
  Optional<Long> lookup(Digest digest);

  /** A stored blob to read, recording a pull of it now: the hit path. Memory only. */
  Optional<StoredContent> open(Digest digest);

  /** Records a pull of a stored blob now (a manifest referencing it was pulled); no-op if absent. */
  void touch(Digest digest);

  /** The index entry of a stored blob. */
  Optional<Entry> entry(Digest digest);

  /** A snapshot of every stored blob, unordered. */
  List<BlobInfo> list();

  /**
   * A writer for blob {@code digest}; several writers of one digest may exist at once (the last
   * commit wins; the bytes are the same). Blocking.
   */
  Writer newWriter(Digest digest) throws IOException;

  /**
   * A writer for blob {@code digest} whose bytes another replica (the blob's owner) is storing in
   * the same shared store at the same time: such a store keeps them local until the commit and
   * stores them only if the owner's object is not there by then (waiting a few seconds for it),
   * so a cold rollout over N replicas writes each blob to the bucket once rather than N times. A
   * store of this replica alone makes a plain {@link #newWriter}. Blocking.
   */
  default Writer newWriterBehindOwner(Digest digest) throws IOException {
    return newWriter(digest);
  }

  /** Runs {@code listener} after each blob stored (on the storing thread; must not block). */
  void onStored(Runnable listener);

  /**
   * Takes a stored blob out of the store (and its links) now; its bytes go after the delete grace.
   *
   * @param ifNotPulledSince epoch milliseconds: the blob is kept when it was pulled after this;
   *     {@code Long.MAX_VALUE} to evict regardless
   * @return bytes freed, or -1 when the blob was not stored or was kept
   */
  long evict(Digest digest, long ifNotPulledSince);

  /** Removes a stored blob (after the delete grace). */
  default boolean delete(Digest digest) {
    return evict(digest, Long.MAX_VALUE) >= 0;
  }

  /** Records changed last-pulled times durably. @return how many were updated */
  int persistAccessTimes();

  /** Where stored blobs may be served. */
  ContentLinks links();

  /** Number of stored blobs. */
  int count();

  /** Total bytes of stored blobs. */
  long bytes();

  @Override
  void close();
}
