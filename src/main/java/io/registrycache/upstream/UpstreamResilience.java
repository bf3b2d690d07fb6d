package io.registrycache.upstream;

import io.github.resilience4j.circuitbreaker.CallNotPermittedException;
import io.github.resilience4j.circuitbreaker.CircuitBreaker;
import io.github.resilience4j.circuitbreaker.CircuitBreakerConfig;
import io.github.resilience4j.core.IntervalFunction;
import io.github.resilience4j.reactor.circuitbreaker.operator.CircuitBreakerOperator;
import io.micrometer.core.instrument.Counter;
import io.micrometer.core.instrument.Gauge;
import io.micrometer.core.instrument.MeterRegistry;
import io.registrycache.config.UpstreamProperties;
import io.registrycache.oci.OciErrorCode;
import java.time.Clock;
import java.time.Duration;
import java.time.Instant;
import java.util.Comparator;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicInteger;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import org.springframework.beans.factory.annotation.Autowired;
import org.springframework.http.HttpStatus;
import org.springframework.stereotype.Component;
import reactor.core.publisher.Mono;
import reactor.util.retry.Retry;
import reactor.util.retry.RetryBackoffSpec;

/**
 * Per upstream: a circuit breaker (Resilience4j) and retries with exponential backoff and jitter
 * (Reactor's {@link Retry#backoff}) around every request, as described in {@code
 * docs/resilience.md}.
 *
 * <p>Each attempt passes the breaker; retries wrap the breaker, so every attempt is one call in the
 * breaker's window and an attempt refused by an open breaker ends the retries at once. What is
 * retried and what the breaker counts is decided by {@link UpstreamFailures}.
 *
 * <p>Meters: gauge {@value #CIRCUIT_STATE} ({@code upstream}, {@code state} =
 * closed|open|half_open; 1 for the current state, 0 otherwise), gauge {@value #FAILURE_RATE}
 * ({@code upstream}; percent over the window, -1 until {@code minimum-number-of-calls}), counters
 * {@value #RETRIES} and {@value #REJECTED} ({@code upstream}).
 */
@Component
public class UpstreamResilience {

  private static final Logger log = LoggerFactory.getLogger(UpstreamResilience.class);

  static final String CIRCUIT_STATE = "registry.cache.upstream.circuit.state";
  static final String FAILURE_RATE = "registry.cache.upstream.circuit.failure.rate";
  static final String RETRIES = "registry.cache.upstream.retries";
  static final String REJECTED = "registry.cache.upstream.circuit.rejected";

  /** Each backoff delay varies randomly by up to this fraction. */
  static final double JITTER = 0.5;

  private static final List<CircuitBreaker.State> REPORTED_STATES =
      List.of(
          CircuitBreaker.State.CLOSED, CircuitBreaker.State.OPEN, CircuitBreaker.State.HALF_OPEN);

  private final MeterRegistry meters;
  private final Clock clock;
  private final Map<String, Guard> guards = new ConcurrentHashMap<>();

  /** On the system clock; for tests that build one alone. */
  public UpstreamResilience(Upstreams upstreams, MeterRegistry meters) {
    this(upstreams, meters, Clock.systemUTC());
  }

  /**
   * Creates the guards of all configured upstreams now, so health and metrics list them.
   *
   * @param clock the service's clock: when an open breaker lets trial requests through, and the
   *     times health shows
   */
  @Autowired
  public UpstreamResilience(Upstreams upstreams, MeterRegistry meters, Clock clock) {
    this.meters = meters;
    this.clock = clock;
    if (upstreams != null) {
      upstreams.all().forEach(this::guard);
    }
  }

  /**
   * {@code attempt} (one request to the upstream, subscribed once per attempt) behind the
   * upstream's circuit breaker, retried after transient failures.
   *
   * @param what the thing asked for, for messages
   */
  <T> Mono<T> protect(Upstream upstream, String what, Mono<T> attempt) {
    return guard(upstream).protect(what, attempt);
  }

  /** The state of every upstream used so far (configured ones from the start), by key. */
  public List<UpstreamState> states() {
    return guards.values().stream()
        .map(Guard::snapshot)
        .sorted(Comparator.comparing(UpstreamState::upstream))
        .toList();
  }

  /**
   * What the health indicator shows of one upstream.
   *
   * @param state {@code CLOSED}, {@code OPEN}, {@code HALF_OPEN}, or {@code DISABLED} when the
   *     breaker is turned off
   * @param since when the breaker entered {@code state} (start-up for a breaker never moved)
   * @param failureRate percent of failed calls in the window, or -1 below {@code
   *     minimum-number-of-calls}
   * @param bufferedCalls calls in the window
   * @param failedCalls failed calls in the window
   * @param lastFailure the reason of the last failure the breaker counted, or {@code null}
   * @param lastFailureAt when it happened, or {@code null}
   * @param retryAt for an open breaker, when trial requests will be let through
   */
  public record UpstreamState(
      String upstream,
      String url,
      String state,
      Instant since,
      float failureRate,
      int bufferedCalls,
      int failedCalls,
      String lastFailure,
      Instant lastFailureAt,
      Instant retryAt) {

    /** Whether the breaker lets every request through. */
    public boolean closed() {
      return "CLOSED".equals(state) || "DISABLED".equals(state);
    }
  }

  /** The current breaker state of an upstream, for tests. */
  CircuitBreaker.State state(Upstream upstream) {
    CircuitBreaker breaker = guard(upstream).breaker;
    return breaker == null ? CircuitBreaker.State.DISABLED : breaker.getState();
  }

  private Guard guard(Upstream upstream) {
    Guard existing = guards.get(upstream.key());
    if (existing != null) {
      return existing;
    }
    return guards.computeIfAbsent(upstream.key(), k -> new Guard(upstream.withoutClient()));
  }

  // ---------------------------------------------------------------------------------------------

  private record Failure(String reason, Instant at) {}

  /** The breaker, the retry spec and the meters of one upstream. */
  private final class Guard {

    private final Upstream upstream;
    private final CircuitBreaker breaker;
    private final IntervalFunction waitInOpen;

    /** Rounds of the open state since the breaker last closed (Resilience4j's attempts). */
    private final AtomicInteger openRounds = new AtomicInteger(1);

    private final Duration maxBackoff;
    private final RetryBackoffSpec retry;
    private final Counter retries;
    private final Counter rejected;
    private volatile Failure lastFailure;
    private volatile Instant stateSince;

    Guard(Upstream upstream) {
      this.upstream = upstream;
      UpstreamProperties.Retry retrySettings = upstream.settings().retry();
      UpstreamProperties.CircuitBreaker breakerSettings = upstream.settings().circuitBreaker();
      this.maxBackoff = retrySettings.maxBackoff();
      Duration first = breakerSettings.waitInOpen();
      Duration max =
          breakerSettings.maxWaitInOpen() == null
                  || breakerSettings.maxWaitInOpen().compareTo(first) < 0
              ? first
              : breakerSettings.maxWaitInOpen();
      this.waitInOpen =
          IntervalFunction.ofExponentialBackoff(
              first, Math.max(1.0, breakerSettings.waitInOpenMultiplier()), max);
      this.stateSince = clock.instant();
      this.retries =
          Counter.builder(RETRIES)
              .description("Requests to the upstream repeated after a transient failure")
              .tag("upstream", upstream.key())
              .register(meters);
      this.rejected =
          Counter.builder(REJECTED)
              .description(
                  "Requests failed at once because the upstream's circuit breaker was open")
              .tag("upstream", upstream.key())
              .register(meters);
      this.retry = retrySpec(retrySettings);
      this.breaker = breakerSettings.enabled() ? breaker(breakerSettings) : null;
      if (breaker != null) {
        for (CircuitBreaker.State state : REPORTED_STATES) {
          Gauge.builder(CIRCUIT_STATE, breaker, b -> b.getState() == state ? 1 : 0)
              .description("State of the upstream's circuit breaker: 1 for the current state")
              .tag("upstream", upstream.key())
              .tag("state", state.name().toLowerCase(Locale.ROOT))
              .register(meters);
        }
        Gauge.builder(FAILURE_RATE, breaker, b -> b.getMetrics().getFailureRate())
            .description(
                "Failed upstream requests in the breaker's window, percent (-1: too few calls)")
            .tag("upstream", upstream.key())
            .register(meters);
      }
    }

    private RetryBackoffSpec retrySpec(UpstreamProperties.Retry settings) {
      if (settings.maxAttempts() <= 1) {
        return null;
      }
      return Retry.backoff(settings.maxAttempts() - 1, settings.initialBackoff())
          .maxBackoff(settings.maxBackoff())
          .jitter(JITTER)
          .filter(e -> UpstreamFailures.classify(e, maxBackoff).retry)
          .doBeforeRetry(
              signal -> {
                retries.increment();
                log.debug(
                    "upstream '{}': retry {} after: {}",
                    upstream.key(),
                    signal.totalRetries() + 1,
                    signal.failure().getMessage());
              })
          // the upstream's own error, not Reactor's RetryExhaustedException
          .onRetryExhaustedThrow((spec, signal) -> signal.failure());
    }

    private CircuitBreaker breaker(UpstreamProperties.CircuitBreaker settings) {
      int window = Math.max(1, settings.slidingWindowSize());
      CircuitBreakerConfig config =
          CircuitBreakerConfig.custom()
              .slidingWindowType(CircuitBreakerConfig.SlidingWindowType.COUNT_BASED)
              .slidingWindowSize(window)
              .minimumNumberOfCalls(Math.max(1, Math.min(window, settings.minimumNumberOfCalls())))
              .failureRateThreshold(settings.failureRateThreshold())
              // short first wait, growing while trials fail: recovery is seen within seconds
              // without hammering an upstream that stays down
              .waitIntervalFunctionInOpenState(waitInOpen)
              .permittedNumberOfCallsInHalfOpenState(
                  Math.max(1, settings.permittedCallsInHalfOpen()))
              .recordException(e -> UpstreamFailures.classify(e, maxBackoff).breakerFailure)
              .ignoreException(e -> UpstreamFailures.classify(e, maxBackoff).breakerIgnores)
              .writableStackTraceEnabled(false)
              .clock(clock) // the wait in open is measured on the service's clock
              .build();
      CircuitBreaker created = CircuitBreaker.of("upstream-" + upstream.key(), config);
      created
          .getEventPublisher()
          .onStateTransition(event -> transitioned(created, event.getStateTransition()));
      return created;
    }

    /** The wait of the current (or next) open state. */
    private Duration currentWait() {
      return Duration.ofMillis(waitInOpen.apply(openRounds.get()));
    }

    private void transitioned(CircuitBreaker breaker, CircuitBreaker.StateTransition transition) {
      stateSince = clock.instant();
      if (transition == CircuitBreaker.StateTransition.CLOSED_TO_OPEN) {
        openRounds.set(1);
      } else if (transition == CircuitBreaker.StateTransition.HALF_OPEN_TO_OPEN) {
        openRounds.incrementAndGet();
      }
      Failure last = lastFailure;
      String lastReason = last == null ? "none" : last.reason();
      switch (transition) {
        case CLOSED_TO_OPEN ->
            log.warn(
                "{}: circuit OPEN: {}% of the last {} requests failed (last: {}); failing fast for {},"
                    + " cached content is served stale",
                UpstreamErrors.name(upstream),
                Math.round(breaker.getMetrics().getFailureRate()),
                breaker.getMetrics().getNumberOfBufferedCalls(),
                lastReason,
                human(currentWait()));
        case HALF_OPEN_TO_CLOSED ->
            log.warn(
                "{}: circuit CLOSED: trial requests succeeded, the upstream is used again",
                UpstreamErrors.name(upstream));
        case HALF_OPEN_TO_OPEN ->
            log.info(
                "{}: circuit stays OPEN: trial requests failed (last: {}); next trial in {}",
                UpstreamErrors.name(upstream),
                lastReason,
                human(currentWait()));
        case OPEN_TO_HALF_OPEN ->
            log.info(
                "{}: circuit HALF_OPEN: letting {} trial requests through",
                UpstreamErrors.name(upstream),
                breaker.getCircuitBreakerConfig().getPermittedNumberOfCallsInHalfOpenState());
        default -> log.info("{}: circuit {}", UpstreamErrors.name(upstream), transition);
      }
    }

    <T> Mono<T> protect(String what, Mono<T> attempt) {
      Mono<T> guarded =
          attempt.doOnError(
              e -> {
                if (UpstreamFailures.classify(e, maxBackoff).breakerFailure) {
                  lastFailure = new Failure(reason(e), clock.instant());
                }
              });
      if (breaker != null) {
        guarded =
            guarded
                .transform(CircuitBreakerOperator.of(breaker))
                .onErrorMap(CallNotPermittedException.class, e -> circuitOpen(what, e));
      }
      return retry == null ? guarded : guarded.retryWhen(retry);
    }

    private UpstreamException circuitOpen(String what, CallNotPermittedException cause) {
      rejected.increment();
      Failure last = lastFailure;
      Duration retryAfter = null;
      StringBuilder message =
          new StringBuilder(UpstreamErrors.name(upstream))
              .append(": circuit open, ")
              .append(what)
              .append(" not requested");
      if (breaker.getState() == CircuitBreaker.State.OPEN) {
        Instant retryAt = stateSince.plus(currentWait());
        Duration left = Duration.between(clock.instant(), retryAt);
        retryAfter = left.isNegative() ? Duration.ZERO : left;
        message.append("; trial requests from ").append(retryAt);
      } else {
        message.append("; trial requests in progress");
      }
      if (last != null) {
        message
            .append(" (last failure at ")
            .append(last.at())
            .append(": ")
            .append(last.reason())
            .append(')');
      }
      return new UpstreamException(
          upstream.key(),
          OciErrorCode.UPSTREAM_UNAVAILABLE,
          HttpStatus.SERVICE_UNAVAILABLE,
          message.toString(),
          retryAfter,
          cause);
    }

    UpstreamState snapshot() {
      Failure last = lastFailure;
      if (breaker == null) {
        return new UpstreamState(
            upstream.key(),
            upstream.url().toString(),
            "DISABLED",
            stateSince,
            -1,
            0,
            0,
            last == null ? null : last.reason(),
            last == null ? null : last.at(),
            null);
      }
      CircuitBreaker.State state = breaker.getState();
      CircuitBreaker.Metrics m = breaker.getMetrics();
      return new UpstreamState(
          upstream.key(),
          upstream.url().toString(),
          state.name(),
          stateSince,
          m.getFailureRate(),
          m.getNumberOfBufferedCalls(),
          m.getNumberOfFailedCalls(),
          last == null ? null : last.reason(),
          last == null ? null : last.at(),
          state == CircuitBreaker.State.OPEN ? stateSince.plus(currentWait()) : null);
    }
  }

  /** {@code 30s}, {@code 0.3s}, {@code 1m}. */
  static String human(Duration d) {
    return d.toString().substring(2).toLowerCase(Locale.ROOT);
  }

  /** The message of a failure without the {@code upstream 'key' (url): } prefix. */
  static String reason(Throwable failure) {
    String message = failure.getMessage();
    if (message == null) {
      return failure.getClass().getSimpleName();
    }
    int colon = message.indexOf("): ");
    return message.startsWith("upstream '") && colon > 0 ? message.substring(colon + 3) : message;
  }
}
