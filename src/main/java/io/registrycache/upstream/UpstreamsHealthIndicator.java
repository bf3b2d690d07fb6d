package io.registrycache.upstream;

import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import org.springframework.boot.health.contributor.Health;
import org.springframework.boot.health.contributor.HealthIndicator;
import org.springframework.boot.health.contributor.Status;
import org.springframework.stereotype.Component;

/**
 * Health contributor {@code upstreams}: the circuit breaker of every upstream, with its state, the
 * failure rate over its window and the last failure it counted.
 *
 * <p>Never {@code DOWN}: with an upstream down the cache still serves what it holds, so this
 * indicator is kept out of the {@code readiness} group ({@code application.properties}) and reports
 * {@value #DEGRADED_CODE} (HTTP 200, ordered between {@code OUT_OF_SERVICE} and {@code UP}) while
 * any breaker is open or half-open, {@code UP} otherwise. It only reads in-memory state: no request
 * to any upstream.
 */
@Component
public class UpstreamsHealthIndicator implements HealthIndicator {

  static final String DEGRADED_CODE = "DEGRADED";

  /** Some upstream is failing: cached content is served, uncached content may fail. */
  public static final Status DEGRADED =
      new Status(
          DEGRADED_CODE, "an upstream's circuit breaker is open: cached content is served stale");

  private final UpstreamResilience resilience;

  public UpstreamsHealthIndicator(UpstreamResilience resilience) {
    this.resilience = resilience;
  }

  @Override
  public Health health() {
    List<UpstreamResilience.UpstreamState> states = resilience.states();
    boolean degraded = states.stream().anyMatch(s -> !s.closed());
    Health.Builder builder = degraded ? Health.status(DEGRADED) : Health.up();
    for (UpstreamResilience.UpstreamState s : states) {
      builder.withDetail(s.upstream(), details(s));
    }
    return builder.build();
  }

  private static Map<String, Object> details(UpstreamResilience.UpstreamState s) {
    Map<String, Object> d = new LinkedHashMap<>();
    d.put("url", s.url());
    d.put("circuit", s.state());
    d.put("since", s.since().toString());
    if (s.failureRate() >= 0) {
      d.put("failureRatePercent", Math.round(s.failureRate() * 10) / 10.0);
    }
    d.put("bufferedCalls", s.bufferedCalls());
    d.put("failedCalls", s.failedCalls());
    if (s.retryAt() != null) {
      d.put("trialRequestsFrom", s.retryAt().toString());
    }
    if (s.lastFailure() != null) {
      d.put("lastFailure", s.lastFailure());
      d.put("lastFailureAt", s.lastFailureAt().toString());
    }
    return d;
  }
}
