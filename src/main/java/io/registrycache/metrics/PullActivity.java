package io.registrycache.metrics;

import java.util.concurrent.atomic.AtomicLong;
import org.springframework.stereotype.Component;

/**
 * Pull requests on the pull port: how many have started and how many have ended, counted by {@link
 * ResponseStatusFilter} for every {@code /v2/<name>/...} request (manifests, blobs, tags,
 * referrers; not the {@code GET /v2/} version check, which load balancers and health checks send
 * all the time). Background work that should not compete with pulls for the CPU can wait for {@link
 * #snapshot()} to stay the same and idle.
 */
@Component
public class PullActivity {

  private final AtomicLong started = new AtomicLong();
  private final AtomicLong ended = new AtomicLong();

  /** A pull request has started. */
  public void started() {
    started.incrementAndGet();
  }

  /** A pull request has ended: answered, failed or cancelled by its client. */
  public void ended() {
    ended.incrementAndGet();
  }

  /**
   * The counts now: equal snapshots taken some time apart whose {@link Snapshot#idle()} is true
   * mean no pull request ran in between.
   */
  public Snapshot snapshot() {
    long e =
        ended.get(); // ended first: a request that ends between the two reads counts as running
    return new Snapshot(started.get(), e);
  }

  /** Pull requests started and ended since the service started. */
  public record Snapshot(long started, long ended) {

    /** True when no pull request is in flight. */
    public boolean idle() {
      return started == ended;
    }
  }
}
