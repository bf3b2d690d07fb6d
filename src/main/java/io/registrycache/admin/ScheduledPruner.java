package io.registrycache.admin;

import io.registrycache.config.PruneProperties;
import io.registrycache.config.RegistryCacheProperties;
import io.registrycache.storage.CacheCollector.Removal;
import io.registrycache.storage.EvictionTurn;
import java.time.Duration;
import java.util.Optional;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.TimeUnit;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import org.springframework.beans.factory.ObjectProvider;
import org.springframework.beans.factory.annotation.Autowired;
import org.springframework.context.SmartLifecycle;
import org.springframework.stereotype.Component;

/**
 * Prunes every {@code registry-cache.prune.schedule} with {@code prune.keep-pulled-within} (age)
 * and {@code prune.keep-per-repository} (count), on its own thread. Off while no schedule is set,
 * or when neither criterion is.
 */
@Component
public class ScheduledPruner implements SmartLifecycle {

  private static final Logger log = LoggerFactory.getLogger(ScheduledPruner.class);

  private final Pruner pruner;
  private final Duration schedule;
  private final PruneRequest request;
  private volatile ScheduledExecutorService executor;
  private final EvictionTurn turn;

  public ScheduledPruner(Pruner pruner, RegistryCacheProperties properties) {
    this(pruner, properties, EvictionTurn.HERE);
  }

  /**
   * @param turn which replica prunes a shared store ({@link EvictionTurn}); without a bean, this
   *     one
   */
  @Autowired
  public ScheduledPruner(
      Pruner pruner, RegistryCacheProperties properties, ObjectProvider<EvictionTurn> turn) {
    this(pruner, properties, turn.getIfAvailable(() -> EvictionTurn.HERE));
  }

  private ScheduledPruner(Pruner pruner, RegistryCacheProperties properties, EvictionTurn turn) {
    this.turn = turn;
    this.pruner = pruner;
    PruneProperties p = properties.prune();
    this.schedule = p.schedule();
    Duration age = p.keepPulledWithin();
    Integer keep = p.keepPerRepository() > 0 ? p.keepPerRepository() : null;
    this.request = age == null && keep == null ? null : new PruneRequest(age, null, keep, false);
    if (schedule != null && request == null) {
      log.warn(
          "registry-cache.prune.schedule is set but neither keep-pulled-within nor keep-per-repository: no pruning");
    }
  }

  @Override
  @SuppressWarnings("FutureReturnValueIgnored") // the task logs its failures; stop() shuts it down
  public void start() {
    if (schedule == null || request == null || schedule.isZero() || schedule.isNegative()) {
      return;
    }
    executor =
        Executors.newSingleThreadScheduledExecutor(
            r -> {
              Thread t = new Thread(r, "scheduled-prune");
              t.setDaemon(true);
              return t;
            });
    executor.scheduleWithFixedDelay(
        this::runOnce, schedule.toMillis(), schedule.toMillis(), TimeUnit.MILLISECONDS);
    log.info(
        "scheduled pruning every {} (keep pulled within {}, keep per repository {})",
        schedule,
        request.olderThan(),
        request.keep());
  }

  /** One scheduled prune; failures are logged, the schedule goes on. */
  void runOnce() {
    Optional<String> elsewhere = turn.elsewhere();
    if (elsewhere.isPresent()) {
      log.debug("scheduled prune: skipped, {} prunes the shared store", elsewhere.get());
      return;
    }
    try {
      Removal r = pruner.prune(request);
      log.info(
          "scheduled prune: {} tag links, {} manifests, {} blobs, {} bytes",
          r.tags().size(),
          r.manifests().size(),
          r.blobs().size(),
          r.bytes());
    } catch (RuntimeException e) {
      log.error("scheduled prune failed; will run again", e);
    }
  }

  @Override
  public void stop() {
    ScheduledExecutorService e = executor;
    if (e != null) {
      e.shutdownNow();
    }
    executor = null;
  }

  @Override
  public boolean isRunning() {
    return executor != null;
  }
}
