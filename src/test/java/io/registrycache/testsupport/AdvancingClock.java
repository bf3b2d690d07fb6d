package io.registrycache.testsupport;

import java.time.Clock;
import java.time.Duration;
import java.time.Instant;
import java.time.ZoneId;
import java.time.ZoneOffset;
import java.util.concurrent.atomic.AtomicLong;

/**
 * The system clock (UTC) plus an offset the test moves forward: time runs as usual for the rest
 * of the service (grace periods, timeouts), and a test that needs time to have passed says how
 * much with {@link #advance(Duration)} instead of sleeping. For a clock that moves only when told,
 * see {@code TestCache.MutableClock}.
 */
public final class AdvancingClock extends Clock {

  private final AtomicLong offsetMillis = new AtomicLong();

  /** Moves this clock {@code by} ahead of the system clock (adds to earlier advances). */
  public void advance(Duration by) {
    offsetMillis.addAndGet(by.toMillis());
  }

  @Override
  public ZoneId getZone() {
    return ZoneOffset.UTC;
  }

  @Override
  public Clock withZone(ZoneId zone) {
    return this;
  }

  @Override
  public long millis() {
    return System.currentTimeMillis() + offsetMillis.get();
  }

  @Override
  public Instant instant() {
    return Instant.now().plusMillis(offsetMillis.get());
  }
}
