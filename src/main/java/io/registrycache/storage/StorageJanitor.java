package io.registrycache.storage;

import io.registrycache.config.RegistryCacheProperties;
import java.time.Duration;
import java.util.Optional;
import java.util.concurrent.Executors;
import java.util.concurrent.RejectedExecutionException;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicReference;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import org.springframework.beans.factory.ObjectProvider;
import org.springframework.beans.factory.annotation.Autowired;
import org.springframework.context.SmartLifecycle;
import org.springframework.stereotype.Component;

/**
 * The background task that keeps the cache within its disk budget and records access times on disk.
 * It runs on its own thread ({@code storage-janitor}), every {@code storage.janitor-interval}, and
 * at once when a newly stored blob takes the cache over the high watermark — never on the request
 * path.
 */
@Component
public class StorageJanitor implements SmartLifecycle {

  private static final Logger log = LoggerFactory.getLogger(StorageJanitor.class);

  private final CacheCollector collector;
  private final BlobStore blobs;
  private final ManifestStore manifests;
  private final Duration interval;
  private final AtomicBoolean queued = new AtomicBoolean();
  private final EvictionTurn turn;

  /** The evicting replica last logged, so a non-owner says why it skips once per change. */
  private final AtomicReference<String> evictorLogged = new AtomicReference<>("");

  private volatile ScheduledExecutorService executor;

  public StorageJanitor(
      CacheCollector collector,
      BlobStore blobs,
      ManifestStore manifests,
      RegistryCacheProperties properties) {
    this(collector, blobs, manifests, properties, EvictionTurn.HERE);
  }

  /**
   * @param turn which replica evicts ({@link EvictionTurn}); without a bean of it, this one
   */
  @Autowired
  public StorageJanitor(
      CacheCollector collector,
      BlobStore blobs,
      ManifestStore manifests,
      RegistryCacheProperties properties,
      ObjectProvider<EvictionTurn> turn) {
    this(collector, blobs, manifests, properties, turn.getIfAvailable(() -> EvictionTurn.HERE));
  }

  private StorageJanitor(
      CacheCollector collector,
      BlobStore blobs,
      ManifestStore manifests,
      RegistryCacheProperties properties,
      EvictionTurn turn) {
    this.turn = turn;
    this.collector = collector;
    this.blobs = blobs;
    this.manifests = manifests;
    this.interval = properties.storage().janitorInterval();
  }

  @Override
  @SuppressWarnings("FutureReturnValueIgnored") // the task logs its failures; stop() shuts it down
  public void start() {
    executor =
        Executors.newSingleThreadScheduledExecutor(
            r -> {
              Thread t = new Thread(r, "storage-janitor");
              t.setDaemon(true);
              return t;
            });
    long period = Math.max(100, interval.toMillis());
    executor.scheduleWithFixedDelay(this::runSafely, period, period, TimeUnit.MILLISECONDS);
    if (collector.maxBytes() > 0) {
      // Without a disk budget nothing is evicted: a stored blob then runs no check at all.
      blobs.onStored(
          () -> {
            if (collector.overHighWatermark()) {
              trigger();
            }
          });
      log.info(
          "disk budget {} bytes; stored {} bytes", collector.maxBytes(), collector.storedBytes());
      trigger();
    }
  }

  /** Asks for a run soon; runs already queued are not repeated. */
  public void trigger() {
    ScheduledExecutorService e = executor;
    if (e != null && queued.compareAndSet(false, true)) {
      try {
        e.execute(this::runSafely);
      } catch (RejectedExecutionException ignored) {
        queued.set(false);
      }
    }
  }

  /**
   * One pass: enforce the budget, then record access times. On a store shared by replicas only the
   * evicting replica ({@link EvictionTurn}) enforces the budget, over the whole store: it rescans
   * blobs and manifests first (every replica's content, every replica's recorded pulls), and folds
   * the pull records afterwards; the others only record their pulls. Blocking.
   */
  public void runOnce() {
    queued.set(false);
    Optional<String> elsewhere = turn.elsewhere();
    String evictor = elsewhere.orElse("this replica");
    if (!evictor.equals(evictorLogged.getAndSet(evictor)) && blobs.shared()) {
      if (elsewhere.isPresent()) {
        log.info(
            "storage janitor: eviction and pruning of the shared store run on {} (owner of the key '{}'); not here",
            evictor,
            EvictionTurn.KEY);
      } else {
        log.info(
            "storage janitor: this replica evicts and prunes for the shared store (owner of the key '{}')",
            EvictionTurn.KEY);
      }
    }
    if (elsewhere.isEmpty()) {
      collector.rescanShared();
      collector.enforceBudget();
    }
    blobs.persistAccessTimes();
    manifests.persistAccessTimes();
    if (elsewhere.isEmpty() && blobs.shared()) {
      blobs.compactPulls(d -> manifests.entry(d).isPresent());
    }
  }

  /** Whether this replica evicts and prunes ({@link EvictionTurn}); else the replica that does. */
  public Optional<String> evictorElsewhere() {
    return turn.elsewhere();
  }

  private void runSafely() {
    try {
      runOnce();
    } catch (RuntimeException e) {
      log.error("storage janitor failed; will run again", e);
    }
  }

  @Override
  public void stop() {
    ScheduledExecutorService e = executor;
    if (e != null) {
      e.shutdownNow();
      try {
        e.awaitTermination(5, TimeUnit.SECONDS);
      } catch (InterruptedException ie) {
        Thread.currentThread().interrupt();
      }
      blobs.persistAccessTimes();
      manifests.persistAccessTimes();
    }
    executor = null;
  }

  @Override
  public boolean isRunning() {
    return executor != null;
  }
}
