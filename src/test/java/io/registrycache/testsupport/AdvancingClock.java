package io.registrycache.testsupport;

import java.time.Clock;
import java.time.Duration;
import java.time.Instant;
import java.time.ZoneId;
import java.time.ZoneOffset;
import java.util.concurrent.atomic.AtomicLong;
import java.util.function.LongSupplier;

/**
 * The system clock (UTC) plus an offset the test moves forward: time runs as usual for the rest of
 * the service (grace periods, timeouts), and a test that needs time to have passed says how much
 * with {@link #advance(Duration)} instead of sleeping. {@link TestCache.MutableClock} is the same
 * over a fixed start: a clock that moves only when told.
 */
public class AdvancingClock extends Clock {

  private final LongSupplier baseMillis;
  private final AtomicLong offsetMillis = new AtomicLong();

  /** The system clock plus the offset. */
  public AdvancingClock() {
    this(System::currentTimeMillis);
  }

  /** {@code baseMillis} (epoch milliseconds) plus the offset. */
  protected AdvancingClock(LongSupplier baseMillis) {
    this.baseMillis = baseMillis;
  }

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
    return baseMillis.getAsLong() + offsetMillis.get();
  }

  @Override
  public Instant instant() {
    return Instant.ofEpochMilli(millis());
  }
}
