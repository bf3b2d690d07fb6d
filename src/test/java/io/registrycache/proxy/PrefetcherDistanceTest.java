package io.registrycache.proxy;

import static org.assertj.core.api.Assertions.assertThat;

import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;

/**
 * An upstream's distance is its quickest recent manifest fetch, so a busy cache does not mistake
 * queueing for distance.
 */
class PrefetcherDistanceTest {

  private static final long MS = TimeUnit.MILLISECONDS.toNanos(1);
  private static final long WINDOW = Prefetcher.Distance.WINDOW_NANOS;

  @Test
  void slowFetchesOfANearbyUpstreamDoNotRaiseItsDistance() {
    Prefetcher.Distance distance = new Prefetcher.Distance();
    assertThat(distance.record(2 * MS, 0)).isEqualTo(2 * MS);
    // the cache gets busy: fetches of the same upstream take 40-300 ms in its queues
    assertThat(distance.record(40 * MS, 10 * MS)).isEqualTo(2 * MS);
    assertThat(distance.record(300 * MS, 20 * MS)).isEqualTo(2 * MS);
  }

  @Test
  void aFarUpstreamStaysFar() {
    Prefetcher.Distance distance = new Prefetcher.Distance();
    distance.record(80 * MS, 0);
    assertThat(distance.record(50 * MS, 1_000 * MS)).isEqualTo(50 * MS);
    assertThat(distance.record(120 * MS, 2_000 * MS)).isEqualTo(50 * MS);
  }

  @Test
  void theQuickestFetchIsForgottenAfterTwoWindows() {
    Prefetcher.Distance distance = new Prefetcher.Distance();
    distance.record(1 * MS, 0);
    // one window later the previous window's floor still counts
    assertThat(distance.record(30 * MS, WINDOW)).isEqualTo(1 * MS);
    // two windows later it no longer does: the upstream moved (or the first fetch was a fluke)
    assertThat(distance.record(30 * MS, 2 * WINDOW)).isEqualTo(30 * MS);
    // a long quiet gap forgets both windows
    assertThat(distance.record(25 * MS, 5 * WINDOW)).isEqualTo(25 * MS);
  }
}
