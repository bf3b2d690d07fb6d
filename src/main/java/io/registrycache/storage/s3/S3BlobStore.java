package io.registrycache.storage.s3;

import io.registrycache.config.ContentScope;
import io.registrycache.oci.Digest;
import io.registrycache.storage.BlobStore;
import io.registrycache.storage.StorageLayout;
import java.time.Clock;
import java.time.Duration;
import java.util.List;
import java.util.Optional;

/**
 * The {@link BlobStore} over an S3-API bucket ({@link S3BlobBackend}): only constructors and the
 * backend's counters; everything else is {@link BlobStore}'s.
 */
public final class S3BlobStore extends BlobStore {

  /** Longest wait for one object-store operation from a blocking caller. */
  static final Duration REQUEST_TIMEOUT = S3BlobBackend.REQUEST_TIMEOUT;

  /** Parts of one upload being sent at once, at most. */
  static final int MAX_PARTS_IN_FLIGHT = S3BlobBackend.MAX_PARTS_IN_FLIGHT;

  private final S3BlobBackend backend;

  /**
   * Lists the bucket into the index, aborts abandoned uploads, and loads the links. Blocking
   * (start-up).
   *
   * @param objects the bucket and prefix
   * @param layout local folders: temporary files of fills
   * @param clock source of access times
   * @param deleteGrace how long an evicted blob's object stays after leaving the index
   * @param scope where a stored blob may be served
   * @param properties part size, abandoned-upload age, index refresh, local tier, redirect
   */
  public S3BlobStore(
      S3Objects objects,
      StorageLayout layout,
      Clock clock,
      Duration deleteGrace,
      ContentScope scope,
      S3StorageProperties properties) {
    this(
        new S3BlobBackend(objects, layout, clock, deleteGrace, properties),
        layout,
        clock,
        deleteGrace,
        scope);
  }

  /**
   * A store whose last pulls are kept in the bucket ({@code lastPulls}): an evicted blob's object
   * goes only after the longer of {@code deleteGrace} and two {@code access-flush} intervals, and
   * not at all when another replica recorded a pull of it meanwhile. Blocking (start-up).
   *
   * @param lastPulls the bucket's pull records, shared with the manifests
   */
  public S3BlobStore(
      S3Objects objects,
      StorageLayout layout,
      Clock clock,
      Duration deleteGrace,
      ContentScope scope,
      S3StorageProperties properties,
      S3LastPulls lastPulls) {
    this(
        new S3BlobBackend(objects, layout, clock, deleteGrace, properties, lastPulls),
        layout,
        clock,
        longer(deleteGrace, lastPulls.flushEvery().multipliedBy(2)),
        scope);
  }

  private static Duration longer(Duration a, Duration b) {
    return a.compareTo(b) >= 0 ? a : b;
  }

  private S3BlobStore(
      S3BlobBackend backend,
      StorageLayout layout,
      Clock clock,
      Duration deleteGrace,
      ContentScope scope) {
    super(backend, layout, clock, deleteGrace, scope);
    this.backend = backend;
  }

  /** The key of blob {@code digest}, relative to the store's prefix. */
  public static String key(Digest digest) {
    return S3BlobBackend.key(digest);
  }

  /**
   * Fills behind an owner whose object was there at the commit, so nothing was uploaded (since
   * start-up).
   */
  public long uploadsSkipped() {
    return backend.uploadsSkipped();
  }

  /**
   * Fills behind an owner whose object was not there at the commit, so this replica uploaded (since
   * start-up).
   */
  public long uploadsBehindOwner() {
    return backend.uploadsBehindOwner();
  }

  /** Uploads of other writers aborted because this replica stored their blob (since start-up). */
  public long othersUploadsAborted() {
    return backend.othersUploadsAborted();
  }

  /** The local tier, when {@code storage.s3.local-tier-size} turned it on (tests). */
  Optional<S3LocalTier> localTier() {
    return backend.localTier();
  }

  /** {@link S3BlobBackend#ownerCopyWaits} (tests). */
  void ownerCopyWaits(List<Duration> waits) {
    backend.ownerCopyWaits(waits);
  }
}
