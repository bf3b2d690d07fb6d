package io.registrycache.storage;

import io.registrycache.config.ContentScope;
import io.registrycache.oci.Digest;
import java.io.IOException;
import java.nio.file.Path;
import java.time.Clock;
import java.time.Duration;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.ScheduledFuture;
import java.util.concurrent.TimeUnit;
import java.util.function.Predicate;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import reactor.core.publisher.Mono;

/**
 * Blobs, content-addressed, over one {@link BlobBackend} (the file system: {@link FileBlobStore};
 * an S3-API bucket: {@code s3.S3BlobStore}): the in-memory index (digest → size, when stored, when
 * last pulled: {@link BlobIndex}), writers, eviction and deferred deletes are here, the same for
 * every backend; the backend keeps the bytes.
 *
 * <p>Reading: {@link #lookup} / {@link #open} (the hit path: memory only, recording a pull with a
 * lock-free volatile store), {@link #size} (no pull recorded). Writing: {@link #newWriter} → {@link
 * ContentWriter#append} → {@link ContentWriter#commit}(expected size), which verifies size and
 * digest before the backend makes the bytes visible, or {@link ContentWriter#abort}. Where a stored
 * blob may be served: {@link #links}.
 *
 * <p>Removing a blob ({@link #evict}) takes it out of the index at once — later requests are misses
 * and fetch it again — but deletes its bytes only after {@code storage.delete-grace}, so a request
 * that looked the blob up just before can still read it; a delete waits while a writer of the same
 * digest is open, and runs under the index's lock for the digest.
 */
public class BlobStore implements AutoCloseable {

  private static final Logger log = LoggerFactory.getLogger(BlobStore.class);

  /** Longest wait at {@link #close} for the deletes that were waiting out their grace. */
  private static final Duration CLOSE_WAIT = Duration.ofSeconds(10);

  private final BlobBackend backend;
  private final StorageLayout layout;
  private final Clock clock;
  private final Duration deleteGrace;
  private final BlobIndex index = new BlobIndex();

  /**
   * Open writers per digest: a pending delete waits for them. Registered under the index's lock.
   */
  private final Map<Digest, Integer> writing = new ConcurrentHashMap<>();

  /** Deletes waiting out their delay, with the blob each deletes; run at {@link #close} instead. */
  private final Map<Runnable, Digest> waiting = new ConcurrentHashMap<>();

  /** Evicted blobs whose bytes wait for their delete. */
  private final Set<Digest> deleting = ConcurrentHashMap.newKeySet();

  private final ScheduledExecutorService executor;
  private final ScheduledFuture<?> rescans;
  private final ContentLinks links;
  private volatile Runnable onStored = () -> {};

  /**
   * Loads the index from {@code backend} ({@link BlobBackend#scan}) and the links. Blocking
   * (start-up).
   *
   * @param backend where the bytes are
   * @param layout local folders: the temporary files of fills
   * @param clock source of created and last-pulled times
   * @param deleteGrace how long an evicted blob's bytes stay after it left the index
   * @param scope where a stored blob may be served ({@link ContentLinks})
   */
  public BlobStore(
      BlobBackend backend,
      StorageLayout layout,
      Clock clock,
      Duration deleteGrace,
      ContentScope scope) {
    this.backend = backend;
    this.layout = layout;
    this.clock = clock;
    this.deleteGrace = deleteGrace;
    this.executor =
        Executors.newSingleThreadScheduledExecutor(
            r -> {
              Thread t = new Thread(r, "blob-deleter");
              t.setDaemon(true);
              return t;
            });
    long started = System.nanoTime();
    backend.scan(index::found);
    log.info(
        "blob index: {} blobs, {} bytes, loaded in {} ms",
        index.count(),
        index.bytes(),
        (System.nanoTime() - started) / 1_000_000);
    backend.started(
        new BlobBackend.Index() {
          @Override
          public Optional<Long> size(Digest digest) {
            return index.size(digest);
          }

          @Override
          public void gone(Digest digest) {
            if (index.removeIf(digest, e -> true)) {
              log.warn(
                  "blob {} is gone from the store (removed by another replica?); dropped from the index",
                  digest);
            }
            backend.dropped(digest);
          }
        });
    long every = backend.rescanEvery().toMillis();
    this.rescans =
        every <= 0
            ? null
            : executor.scheduleWithFixedDelay(
                this::rescanSafely, every, every, TimeUnit.MILLISECONDS);
    this.links = new ContentLinks(backend.links(), "blobs", scope, index::contains);
  }

  /** The backend (tests and backend-specific metrics). */
  protected BlobBackend backend() {
    return backend;
  }

  /**
   * Brings the index up to date with a backend that other processes write too ({@link
   * BlobBackend#rescanEvery}): blobs they stored are added (created and last pulled: as the scan
   * reports), blobs whose bytes are gone are dropped — only those indexed before the scan started
   * and not being written here, so a commit racing the scan is kept. Blocking.
   *
   * @return blobs added plus blobs dropped
   */
  public int rescan() {
    long started = clock.millis();
    Set<Digest> seen = new HashSet<>();
    int[] changed = {0};
    backend.scan(
        (d, size, created, pulled) -> {
          seen.add(d);
          if (index.found(d, size, created, pulled)) {
            changed[0]++;
          }
        });
    index.forEach(
        (d, listed) -> {
          if (!seen.contains(d) && listed.createdMillis() < started && !writing.containsKey(d)) {
            if (index.removeIf(d, e -> e == listed)) { // not if stored again meanwhile
              changed[0]++;
              backend.dropped(d);
            }
          }
        });
    if (changed[0] > 0) {
      log.info(
          "blob index rescanned: {} changes, {} blobs, {} bytes",
          changed[0],
          index.count(),
          index.bytes());
    }
    return changed[0];
  }

  private void rescanSafely() {
    try {
      rescan();
    } catch (RuntimeException e) {
      log.warn("cannot rescan the blob store, will try again: {}", e.toString());
    }
  }

  /** Where stored blobs may be served; an evicted blob loses its links. */
  public ContentLinks links() {
    return links;
  }

  /** Size in bytes of a stored (verified, complete) blob, if it is stored. Records no access. */
  public Optional<Long> size(Digest digest) {
    return index.size(digest);
  }

  /**
   * Whether blob {@code digest} is stored, asking the backend when the index does not know it: a
   * backend shared by replicas may hold a blob another replica stored since the last scan ({@link
   * BlobBackend#stat}); it is indexed then, as created now (so a rescan that listed the backend
   * before it appeared does not drop it).
   *
   * @return {@code true} when stored (and now indexed); {@code false} when not, or when the backend
   *     cannot be asked (the caller fills the blob as a miss)
   */
  public Mono<Boolean> recheck(Digest digest) {
    if (index.contains(digest)) {
      return Mono.just(true);
    }
    return backend
        .stat(digest)
        .map(
            size -> {
              size.ifPresent(
                  s -> {
                    long now = clock.millis();
                    if (index.found(digest, s, now, now)) {
                      // Found because a client asks for it: a pull here, to be recorded.
                      index.entry(digest).ifPresent(e -> e.persistedMillis = 0);
                      log.debug("{} found in the store, stored by another replica", digest);
                    }
                  });
              return size.isPresent();
            })
        .onErrorResume(
            e -> {
              log.warn(
                  "cannot look for {} in the store, filling it as a miss: {}",
                  digest,
                  e.toString());
              return Mono.just(false);
            });
  }

  /** Size in bytes of a stored blob, recording a pull of it now. Memory only; empty: a miss. */
  public Optional<Long> lookup(Digest digest) {
    BlobIndex.Entry e = index.pulled(digest, clock.millis());
    return e == null ? Optional.empty() : Optional.of(e.size());
  }

  /** A stored blob to read, recording a pull of it now: the hit path. Memory only. */
  public Optional<StoredContent> open(Digest digest) {
    BlobIndex.Entry e = index.pulled(digest, clock.millis());
    return e == null ? Optional.empty() : Optional.of(backend.open(digest, e.size()));
  }

  /**
   * Records a pull of a stored blob now (a manifest referencing it was pulled); no-op if absent.
   */
  public void touch(Digest digest) {
    index.pulled(digest, clock.millis());
  }

  /** The index entry of a stored blob. */
  public Optional<BlobIndex.Entry> entry(Digest digest) {
    return index.entry(digest);
  }

  /** A snapshot of every stored blob, unordered. */
  public List<BlobIndex.BlobInfo> list() {
    return index.list();
  }

  /**
   * A writer for blob {@code digest}, over a new temporary file; several writers of one digest may
   * exist at once (the last commit wins; the bytes are the same). Blocking.
   */
  public ContentWriter newWriter(Digest digest) throws IOException {
    return newWriter(digest, false, null, null);
  }

  /**
   * A writer for blob {@code digest} whose commit links it to {@code repository} of {@code
   * upstreamKey} ({@link #links}; no link when {@code null}) once verified and before it is
   * visible, so a replica sharing the store that finds the blob finds its link (a failed link is
   * logged). {@code behindOwner}: the blob's owner, another replica, stores it in a shared backend
   * now; such a backend keeps the bytes local and, at the commit, stores them only if the owner's
   * object is not there yet. Blocking.
   */
  public ContentWriter newWriter(
      Digest digest, boolean behindOwner, String upstreamKey, String repository)
      throws IOException {
    index.locked(digest, () -> writing.merge(digest, 1, Integer::sum));
    try {
      BlobSink sink = backend.sink(digest, behindOwner);
      return new BlobWriter(
          digest,
          layout.newTempFile("blob-" + digest.hex().substring(0, 12)),
          new BlobSink() {
            @Override
            public void appended(Path temp, long written) throws IOException {
              sink.appended(temp, written);
            }

            @Override
            public Path store(Path temp, long size) throws IOException {
              try {
                if (upstreamKey != null) {
                  links.link(digest, upstreamKey, repository);
                }
              } catch (RuntimeException e) {
                log.warn("blob {}: cannot link it, storing it anyway: {}", digest, e.toString());
              }
              Path stored = sink.store(temp, size);
              index.stored(digest, size, clock.millis());
              return stored;
            }

            @Override
            public void closed(boolean stored) {
              writerClosed(digest);
              sink.closed(stored);
              if (stored) {
                onStored.run();
              }
            }

            @Override
            public void ownerGaveUp() {
              sink.ownerGaveUp();
            }
          });
    } catch (IOException | RuntimeException e) {
      writerClosed(digest);
      throw e;
    }
  }

  private void writerClosed(Digest digest) {
    writing.computeIfPresent(digest, (d, n) -> n > 1 ? n - 1 : null);
  }

  /** Runs {@code listener} after each blob stored (on the storing thread; must not block). */
  public void onStored(Runnable listener) {
    this.onStored = listener;
  }

  /**
   * Takes a stored blob out of the index (and its links) now; its bytes go after the delete grace.
   *
   * @param ifNotPulledSince epoch milliseconds: the blob is kept when it was pulled after this (it
   *     became hot after it was selected); {@code Long.MAX_VALUE} to evict regardless
   * @return bytes freed, or -1 when the blob was not stored or was kept
   */
  public long evict(Digest digest, long ifNotPulledSince) {
    long lastPulled =
        index.entry(digest).map(BlobIndex.Entry::lastPulledMillis).orElse(ifNotPulledSince);
    long freed = index.evict(digest, ifNotPulledSince);
    if (freed >= 0) {
      backend.dropped(digest);
      links.unlinkAll(digest);
      deleting.add(digest);
      long known = Math.min(lastPulled, ifNotPulledSince);
      deleteLater(digest, known, deleteGrace);
    }
    return freed;
  }

  /** Removes a stored blob (its bytes after the delete grace). */
  public boolean delete(Digest digest) {
    return evict(digest, Long.MAX_VALUE) >= 0;
  }

  /**
   * Deletes the bytes of an evicted blob ({@link #deleteIfUnused}) after {@code delay}, on the
   * deleter thread; at once when there is no delay or the store is closed. Nothing waits for a
   * delayed delete, so its failure is logged here (WARN, with the digest).
   */
  private void deleteLater(Digest digest, long lastPulled, Duration delay) {
    Runnable delete = () -> deleteIfUnused(digest, lastPulled);
    if (delay.isZero() || delay.isNegative() || executor.isShutdown()) {
      delete.run();
      return;
    }
    waiting.put(delete, digest);
    StorageLayout.later(
        delay,
        executor,
        () -> {
          if (waiting.remove(delete) != null) {
            delete.run();
          }
        },
        failure -> deleteFailed(digest, failure));
  }

  private static void deleteFailed(Digest digest, Throwable failure) {
    log.warn(
        "cannot delete the bytes of evicted blob {}; they stay in the store: {}",
        digest,
        failure.toString());
  }

  /**
   * Deletes the bytes of an evicted blob unless it was stored again meanwhile, another process
   * recorded a pull of it after {@code lastPulled} (the time its eviction went by; {@link
   * BlobBackend#pulledAfter}: then it stays), or a writer of it is open (then later). Under the
   * index's lock for the digest, where writers register, so a writer either registered before (and
   * the delete waits) or starts after the delete.
   */
  private void deleteIfUnused(Digest digest, long lastPulled) {
    if (backend.pulledAfter(digest, lastPulled)) {
      deleting.remove(digest);
      log.info(
          "evicted blob {} kept in the store: another replica pulled it since it was selected",
          digest);
      return;
    }
    boolean[] busy = {false};
    index.ifAbsent(
        digest,
        () -> {
          if (writing.containsKey(digest)) {
            busy[0] = true;
          } else {
            backend.delete(digest);
          }
        });
    if (busy[0]) {
      deleteLater(digest, lastPulled, deleteGrace.isZero() ? Duration.ofSeconds(1) : deleteGrace);
    } else {
      deleting.remove(digest);
    }
  }

  /**
   * Records the last-pulled times that changed since the last call durably, where the backend can
   * ({@link BlobBackend#recordPulls}: the file system writes them as the files' access times, read
   * back at start-up, so the order of eviction survives a restart).
   *
   * @return how many were updated
   */
  public int persistAccessTimes() {
    if (!backend.recordsPulls()) {
      return 0;
    }
    Map<Digest, Long> changed = new HashMap<>();
    Map<Digest, BlobIndex.Entry> entries = new HashMap<>();
    index.forEach(
        (digest, e) -> {
          long pulled = e.lastPulledMillis;
          if (pulled > e.persistedMillis) {
            changed.put(digest, pulled);
            entries.put(digest, e);
          }
        });
    if (changed.isEmpty()) {
      return 0;
    }
    try {
      backend.recordPulls(changed);
    } catch (IOException ex) {
      log.warn(
          "cannot record the last pulls of {} blobs, will try again: {}",
          changed.size(),
          ex.toString());
      return 0;
    }
    changed.forEach(
        (digest, pulled) -> {
          BlobIndex.Entry e = entries.get(digest);
          if (pulled > e.persistedMillis) {
            e.persistedMillis = pulled;
          }
        });
    return changed.size();
  }

  /** Whether other processes store and evict in the same backend ({@link BlobBackend#shared}). */
  public boolean shared() {
    return backend.shared();
  }

  /**
   * Folds the backend's pull records into one ({@link BlobBackend#compactPulls}), keeping those of
   * the blobs stored or awaiting their delete and of whatever {@code alsoKeep} accepts (stored
   * manifests). Blocking; failures are logged.
   */
  public void compactPulls(Predicate<Digest> alsoKeep) {
    try {
      backend.compactPulls(d -> index.contains(d) || deleting.contains(d) || alsoKeep.test(d));
    } catch (IOException | RuntimeException e) {
      log.warn("cannot fold the pull records, will try again: {}", e.toString());
    }
  }

  /** Number of stored blobs. */
  public int count() {
    return index.count();
  }

  /** Total bytes of stored blobs. */
  public long bytes() {
    return index.bytes();
  }

  /** Runs the deletes that wait out their grace now, stops the rescans and closes the backend. */
  @Override
  public void close() {
    if (rescans != null) {
      rescans.cancel(false);
    }
    executor.shutdownNow(); // a delay that ends from now on is refused: its delete runs below
    // On a daemon thread, waited for at most CLOSE_WAIT: a store that is gone (a bucket no
    // longer answering) must not hold the process; the deletes left are then the store's to redo.
    Thread deletes =
        new Thread(
            () -> {
              for (Map.Entry<Runnable, Digest> pending : List.copyOf(waiting.entrySet())) {
                if (waiting.remove(pending.getKey()) != null) {
                  try {
                    pending.getKey().run();
                  } catch (RuntimeException e) {
                    deleteFailed(pending.getValue(), e);
                  }
                }
              }
            },
            "blob-deleter-close");
    deletes.setDaemon(true);
    deletes.start();
    try {
      deletes.join(CLOSE_WAIT.toMillis());
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    }
    if (deletes.isAlive()) {
      log.warn(
          "closing: deletes of evicted blobs still running after {}; left to the store",
          CLOSE_WAIT);
    }
    links.close();
    backend.close();
  }
}
