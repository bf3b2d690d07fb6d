package io.registrycache.storage;

import io.registrycache.oci.Digest;
import java.io.IOException;
import java.time.Duration;
import java.util.Map;
import java.util.Optional;
import java.util.function.Predicate;
import reactor.core.publisher.Mono;

/**
 * Where blobs' bytes are kept: the narrow contract a store backend implements (the file system:
 * {@link FileBlobBackend}; an S3-API bucket: {@code s3.S3BlobBackend}). Everything else — the
 * in-memory index (sizes, last pulls, eviction order), writers per digest, deferred deletes,
 * verification — is {@link BlobStore}'s, the same for every backend.
 *
 * <p>Five required methods: {@link #scan}, {@link #open}, {@link #sink}, {@link #delete} and {@link
 * #links}; the rest have defaults fit for a store that only this process writes. A new backend
 * passes {@code BlobStoreContract} (src/test) by subclassing it.
 */
public interface BlobBackend extends AutoCloseable {

  /** One stored blob, as a {@link #scan} finds it. Times are epoch milliseconds. */
  @FunctionalInterface
  interface Found {
    void found(Digest digest, long size, long createdMillis, long lastPulledMillis);
  }

  /** What the backend may ask of the store's index (set by {@link #started}). */
  interface Index {
    /** Size in bytes of an indexed blob; empty when the store does not have it. */
    Optional<Long> size(Digest digest);

    /** The blob's bytes are gone from the backend (another replica removed them): unindex it. */
    void gone(Digest digest);
  }

  /**
   * Visits every stored blob: at start-up, and every {@link #rescanEvery} for a backend shared with
   * other processes. Blocking.
   */
  void scan(Found visitor);

  /**
   * The stored blob {@code digest} of {@code size} bytes (as indexed), to read: the hit path, so it
   * does no I/O before the transfer.
   */
  StoredContent open(Digest digest, long size);

  /**
   * Where the bytes of a new blob go ({@link BlobWriter}'s temporary file is written by the writer;
   * the sink makes it visible under the digest in {@link BlobSink#store}, only after verification).
   * {@code closed} is called once, after {@link BlobStore} indexed a stored blob. Blocking.
   *
   * @param behindOwner another replica (the blob's owner) stores the same bytes in a shared backend
   *     now: keep them local until the commit ({@link BlobStore#newWriter(Digest, boolean, String,
   *     String)} behind an owner); a backend of this process alone ignores it
   */
  BlobSink sink(Digest digest, boolean behindOwner) throws IOException;

  /**
   * Deletes the bytes of an evicted blob, after the delete grace, when no writer of it is open;
   * runs under the index's lock for the digest, so no commit of it interleaves. Best effort: a
   * failure is logged. Blocking.
   */
  void delete(Digest digest);

  /** Where the links of stored blobs to repositories are kept durably ({@link ContentLinks}). */
  LinkPersistence links();

  /**
   * Looks for a blob the index does not have: a backend shared by replicas may hold one another
   * replica stored since the last scan. Empty when not there; the default (a backend only this
   * process writes) never looks.
   *
   * @return the blob's size in bytes, when stored; an error when the backend cannot be asked
   */
  default Mono<Optional<Long>> stat(Digest digest) {
    return Mono.just(Optional.empty());
  }

  /** How often to {@link #scan} again for blobs other processes stored or removed; zero: never. */
  default Duration rescanEvery() {
    return Duration.ZERO;
  }

  /** The index is loaded; {@code index} stays valid for the backend's life. */
  default void started(Index index) {}

  /**
   * The index dropped a blob (evicted here, or found gone from a shared backend): drop what is kept
   * beside its bytes, such as a local copy. Its bytes go later, by {@link #delete}, if at all.
   */
  default void dropped(Digest digest) {}

  /**
   * Records the last pulls of stored blobs durably, if the backend can: digest → epoch
   * milliseconds, the blobs whose last pull moved since the previous call. A backend may write them
   * later in one batch (S3: one object per {@code storage.s3.access-flush}). Blocking.
   *
   * @throws IOException when nothing could be recorded (the store calls again with them later)
   */
  default void recordPulls(Map<Digest, Long> pulls) throws IOException {}

  /**
   * Whether {@link #recordPulls} keeps anything: when not, last-pulled times live in memory only.
   */
  default boolean recordsPulls() {
    return false;
  }

  /**
   * Whether other processes store and evict in this backend too (a bucket shared by replicas): then
   * the index is brought up to date ({@link BlobStore#rescan}) before a listing or an eviction pass
   * covers the whole store.
   */
  default boolean shared() {
    return false;
  }

  /**
   * Whether another process recorded a pull of {@code digest} later than {@code millis} (read
   * afresh from the backend): an evicted blob's delete is then cancelled. Blocking; {@code false}
   * for a backend only this process pulls from, or when the records cannot be read.
   */
  default boolean pulledAfter(Digest digest, long millis) {
    return false;
  }

  /**
   * Folds the durable pull records of every process into one, keeping the digests {@code keep}
   * accepts; run by the one process that evicts from a shared backend. Blocking; no-op by default.
   */
  default void compactPulls(Predicate<Digest> keep) throws IOException {}

  /** Stops what the backend runs in the background. */
  @Override
  default void close() {}
}
