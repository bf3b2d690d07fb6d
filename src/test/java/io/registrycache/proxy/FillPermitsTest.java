package io.registrycache.proxy;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.registrycache.oci.OciErrorCode;
import io.registrycache.oci.OciException;
import java.util.Optional;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.Test;
import reactor.core.publisher.Mono;
import reactor.core.publisher.Sinks;

/**
 * The single-flight asks a caller's {@link FillPermits} for a permit only when it starts a new
 * call: a joiner, or a caller that finds the result stored, takes none; a refused caller starts
 * nothing; the permit comes back when the call ends, not when its caller goes away.
 */
class FillPermitsTest {

  /** One permit, counted. */
  static final class OnePermit implements FillPermits {
    final AtomicInteger inUse = new AtomicInteger();
    final AtomicInteger asked = new AtomicInteger();

    @Override
    public boolean tryAcquire() {
      asked.incrementAndGet();
      return inUse.compareAndSet(0, 1);
    }

    @Override
    public void release() {
      assertThat(inUse.decrementAndGet()).as("released once per permit").isZero();
    }

    @Override
    public OciException refused() {
      return new OciException(OciErrorCode.TOOMANYREQUESTS, "over the limit");
    }
  }

  @Test
  void onlyTheCallerThatStartsACallTakesAPermitAndGetsItBackWhenTheCallEnds() {
    SingleFlight<String, Mono<String>> flights = new SingleFlight<>();
    OnePermit permits = new OnePermit();
    AtomicInteger started = new AtomicInteger();
    Sinks.One<String> upstream = Sinks.one();

    var first =
        SingleFlight.shared(
                flights,
                "a",
                Optional::empty,
                permits,
                () -> {
                  started.incrementAndGet();
                  return upstream.asMono();
                })
            .toFuture();
    assertThat(permits.inUse).hasValue(1);

    // the same key joins: no permit asked, nothing started
    var joiner =
        SingleFlight.shared(
                flights,
                "a",
                Optional::empty,
                permits,
                () -> {
                  started.incrementAndGet();
                  return upstream.asMono();
                })
            .toFuture();
    assertThat(permits.asked).hasValue(1);

    // another key needs a new call: refused, and its work never runs
    assertThatThrownBy(
            () ->
                SingleFlight.shared(
                        flights,
                        "b",
                        Optional::empty,
                        permits,
                        () -> {
                          started.incrementAndGet();
                          return Mono.just("b");
                        })
                    .block())
        .isInstanceOfSatisfying(
            OciException.class, e -> assertThat(e.code()).isEqualTo(OciErrorCode.TOOMANYREQUESTS));
    assertThat(flights.size()).as("nothing left in flight for the refused key").isEqualTo(1);

    // found stored meanwhile: no permit asked
    assertThat(
            SingleFlight.shared(
                    flights,
                    "c",
                    () -> Optional.of("stored"),
                    permits,
                    () -> {
                      throw new AssertionError("not fetched");
                    })
                .block())
        .isEqualTo("stored");
    assertThat(permits.asked).hasValue(2);

    first.cancel(true); // the caller goes away: the call goes on, and keeps its permit
    assertThat(permits.inUse).hasValue(1);
    upstream.tryEmitValue("a");
    assertThat(joiner.join()).isEqualTo("a");
    assertThat(started).hasValue(1);
    assertThat(permits.inUse).as("the call ended: its permit is back").hasValue(0);

    assertThat(
            SingleFlight.shared(flights, "b", Optional::empty, permits, () -> Mono.just("b"))
                .block())
        .isEqualTo("b");
    assertThat(permits.inUse).hasValue(0);
  }
}
