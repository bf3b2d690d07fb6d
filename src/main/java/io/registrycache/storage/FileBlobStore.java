package io.registrycache.storage;

import io.registrycache.config.ConditionalOnStorageType;
import io.registrycache.config.StorageProperties;
import io.registrycache.config.ContentScope;
import io.registrycache.config.RegistryCacheProperties;
import io.registrycache.oci.Digest;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.BasicFileAttributeView;
import java.nio.file.attribute.FileTime;
import java.time.Clock;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import org.springframework.beans.factory.annotation.Autowired;
import org.springframework.stereotype.Component;

/**
 * Blobs on disk, content-addressed: the file-system {@link BlobStore}.
 *
 * <p>Writing goes through a {@link BlobWriter} ({@link #newWriter}): a blob is only ever visible
 * under its digest after its bytes were verified against that digest, in {@link
 * BlobWriter#commit}. Reading is {@link #lookup} (the hit path) or {@link #size} and {@link #path}
 * (zero-copy serving from the file). The index of stored blobs (digest → {@link Entry}: size, when it
 * was stored, when it was last pulled) is held in memory, built at start-up from one {@code stat}
 * per file, so a cache hit needs no file-system call before the transfer. A hit records its time
 * in a {@code volatile} field — no lock, no disk write; the janitor writes access times to the
 * files' {@code atime} now and then ({@link #persistAccessTimes}), so the order of eviction
 * survives a restart.
 *
 * <p>Removing a blob ({@link #evict}) takes it out of the index at once — later requests are
 * misses and fetch it again — but unlinks the file only after {@code storage.delete-grace}, so a
 * request that looked the blob up just before can still open it. A file a reader has open may be
 * unlinked at any time: on Linux the reader keeps the inode.
 *
 * <p>The store when {@code registry-cache.storage.type} is {@code filesystem} or unset; {@code s3}
 * selects {@link io.registrycache.storage.s3.S3BlobStore} instead ({@code S3StorageConfiguration}).
 */
@Component
@ConditionalOnStorageType(StorageProperties.Type.FILESYSTEM)
public class FileBlobStore implements BlobStore {

  private static final Logger log = LoggerFactory.getLogger(FileBlobStore.class);

  private final StorageLayout layout;
  private final Clock clock;
  private final Duration deleteGrace;
  private final BlobIndex index = new BlobIndex();
  /** Open writers per digest: a pending unlink waits for them. */
  private final Map<Digest, Integer> writing = new ConcurrentHashMap<>();
  private final ScheduledExecutorService unlinker;
  private volatile Runnable onStored = () -> {};
  private final ContentLinks links;

  /** A store with the system clock and no delete grace (tests). */
  public FileBlobStore(StorageLayout layout) throws IOException {
    this(layout, Clock.systemUTC(), Duration.ZERO);
  }

  @Autowired
  public FileBlobStore(StorageLayout layout, RegistryCacheProperties properties, Clock clock) throws IOException {
    this(layout, clock, properties.storage().deleteGrace(), properties.storage().contentScope());
  }

  /** A store serving content in the default scope ({@code repository}). */
  public FileBlobStore(StorageLayout layout, Clock clock, Duration deleteGrace) throws IOException {
    this(layout, clock, deleteGrace, RegistryCacheProperties.defaults().storage().contentScope());
  }

  /**
   * @param layout the folders
   * @param clock source of access times
   * @param deleteGrace how long an evicted blob's file stays on disk after leaving the index
   * @param scope where a stored blob may be served ({@link ContentLinks})
   */
  public FileBlobStore(StorageLayout layout, Clock clock, Duration deleteGrace, ContentScope scope)
      throws IOException {
    this.layout = layout;
    this.clock = clock;
    this.deleteGrace = deleteGrace;
    this.unlinker =
        Executors.newSingleThreadScheduledExecutor(
            r -> {
              Thread t = new Thread(r, "blob-unlinker");
              t.setDaemon(true);
              return t;
            });
    long started = System.nanoTime();
    layout.scanContent(
        layout.blobsRoot(),
        (digest, attrs) -> {
          long created = attrs.lastModifiedTime().toMillis();
          index.found(digest, attrs.size(), created, Math.max(created, attrs.lastAccessTime().toMillis()));
        });
    log.info(
        "blob index: {} blobs, {} bytes, loaded in {} ms",
        index.count(), index.bytes(), (System.nanoTime() - started) / 1_000_000);
    this.links = new ContentLinks(layout, "blobs", scope, index::contains);
  }

  /** Where stored blobs may be served; an evicted blob loses its links. */
  @Override
  public ContentLinks links() {
    return links;
  }

  /** Size in bytes of a stored (verified, complete) blob, if it is stored. Records no access. */
  @Override
  public Optional<Long> size(Digest digest) {
    return index.size(digest);
  }

  /**
   * Size in bytes of a stored blob, recording a pull of it now: the hit path. Lock-free.
   *
   * @return empty when the blob is not stored (a miss)
   */
  @Override
  public Optional<Long> lookup(Digest digest) {
    Entry e = index.pulled(digest, clock.millis());
    return e == null ? Optional.empty() : Optional.of(e.size);
  }

  @Override
  public Optional<StoredContent> open(Digest digest) {
    Entry e = index.pulled(digest, clock.millis());
    return e == null ? Optional.empty() : Optional.of(new StoredContent.File(digest, layout.blob(digest), e.size));
  }

  /** Records a pull of a stored blob now (a manifest referencing it was pulled); no-op if absent. */
  @Override
  public void touch(Digest digest) {
    index.pulled(digest, clock.millis());
  }

  /** The index entry of a stored blob. */
  @Override
  public Optional<Entry> entry(Digest digest) {
    return index.entry(digest);
  }

  /** A snapshot of every stored blob, unordered. */
  @Override
  public List<BlobInfo> list() {
    return index.list();
  }

  /** Path of a stored blob; only meaningful when {@link #size} is present. */
  public Path path(Digest digest) {
    return layout.blob(digest);
  }

  /**
   * A writer for blob {@code digest}, over a new temporary file; several writers of one digest
   * may exist at once (the last commit wins; the bytes are the same). Blocking.
   */
  @Override
  public BlobWriter newWriter(Digest digest) throws IOException {
    writing.merge(digest, 1, Integer::sum);
    try {
      return new BlobWriter(
          digest,
          layout.newTempFile("blob-" + digest.hex().substring(0, 12)),
          new BlobWriter.Sink() {
            @Override
            public Path store(Path temp, long size) {
              commitFile(digest, temp, size);
              return layout.blob(digest);
            }

            @Override
            public void closed(boolean stored) {
              writerClosed(digest, stored);
            }
          });
    } catch (IOException | RuntimeException e) {
      writing.computeIfPresent(digest, (d, n) -> n > 1 ? n - 1 : null);
      throw e;
    }
  }

  /**
   * Moves a verified temporary file to its content address and indexes it, atomically with
   * respect to a pending unlink of the same digest ({@link #evict}).
   */
  void commitFile(Digest digest, Path verifiedTemp, long size) {
    index.stored(digest, size, clock.millis(), () -> {
      try {
        layout.moveIntoPlace(verifiedTemp, layout.blob(digest));
      } catch (IOException e) {
        throw new UncheckedIOException("cannot store blob " + digest, e);
      }
    });
  }

  /** Called by a writer that committed or aborted. */
  void writerClosed(Digest digest, boolean stored) {
    writing.computeIfPresent(digest, (d, n) -> n > 1 ? n - 1 : null);
    if (stored) {
      onStored.run();
    }
  }

  /** Runs {@code listener} after each blob stored (on the storing thread; must not block). */
  @Override
  public void onStored(Runnable listener) {
    this.onStored = listener;
  }

  /**
   * Takes a stored blob out of the index now and unlinks its file after the delete grace.
   *
   * @param ifNotPulledSince epoch milliseconds: the blob is kept when it was pulled after this
   *     (it became hot after it was selected); {@code Long.MAX_VALUE} to evict regardless
   * @return bytes freed, or -1 when the blob was not stored or was kept
   */
  @Override
  public long evict(Digest digest, long ifNotPulledSince) {
    long freed = index.evict(digest, ifNotPulledSince);
    if (freed >= 0) {
      links.unlinkAll(digest);
      scheduleUnlink(digest, deleteGrace);
    }
    return freed;
  }

  private void scheduleUnlink(Digest digest, Duration delay) {
    if (delay.isZero() || delay.isNegative()) {
      unlinkIfUnused(digest);
      return;
    }
    try {
      unlinker.schedule(() -> unlinkIfUnused(digest), delay.toMillis(), TimeUnit.MILLISECONDS);
    } catch (java.util.concurrent.RejectedExecutionException e) {
      unlinkIfNotIndexed(digest); // shutting down
    }
  }

  /**
   * Unlinks the file of an evicted blob unless it was stored again meanwhile. Runs under the
   * index's lock for the digest, so it cannot interleave with {@link #commitFile}.
   */
  private void unlinkIfUnused(Digest digest) {
    if (writing.containsKey(digest)) {
      // A writer will replace the file (or abort and leave it): look again later.
      scheduleUnlink(digest, deleteGrace.isZero() ? Duration.ofSeconds(1) : deleteGrace);
      return;
    }
    unlinkIfNotIndexed(digest);
  }

  private void unlinkIfNotIndexed(Digest digest) {
    index.ifAbsent(digest, () -> StorageLayout.deleteQuietly(layout.blob(digest)));
  }

  /**
   * Writes the in-memory last-pulled times that changed to the files' access times ({@code
   * atime}), read back at start-up. One {@code utimes} per blob pulled since the last call.
   *
   * @return how many files were updated
   */
  @Override
  public int persistAccessTimes() {
    int[] n = {0};
    index.forEach((digest, e) -> {
      long pulled = e.lastPulledMillis;
      if (pulled > e.persistedMillis) {
        try {
          Files.getFileAttributeView(layout.blob(digest), BasicFileAttributeView.class)
              .setTimes(null, FileTime.fromMillis(pulled), null);
          e.persistedMillis = pulled;
          n[0]++;
        } catch (IOException ex) {
          log.debug("cannot record access time of {}: {}", digest, ex.toString());
        }
      }
    });
    return n[0];
  }

  StorageLayout layout() {
    return layout;
  }

  /** Number of stored blobs. */
  @Override
  public int count() {
    return index.count();
  }

  /** Total bytes of stored blobs. */
  @Override
  public long bytes() {
    return index.bytes();
  }

  /** Unlinks what waits out its grace now, and stops the unlinker. */
  @Override
  public void close() {
    for (Runnable pending : unlinker.shutdownNow()) {
      pending.run();
    }
    links.close();
  }
}
