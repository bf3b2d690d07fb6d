package io.registrycache.ratelimit;

import com.github.benmanes.caffeine.cache.Cache;
import com.github.benmanes.caffeine.cache.Caffeine;
import io.github.bucket4j.Bucket;
import io.github.bucket4j.ConsumptionProbe;
import io.github.bucket4j.TimeMeter;
import io.github.resilience4j.bulkhead.Bulkhead;
import io.github.resilience4j.bulkhead.BulkheadConfig;
import io.micrometer.core.instrument.Counter;
import io.micrometer.core.instrument.MeterRegistry;
import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import io.registrycache.auth.Identity;
import io.registrycache.config.RateLimitProperties;
import io.registrycache.config.RegistryCacheProperties;
import io.registrycache.oci.OciException;
import io.registrycache.proxy.FillPermits;
import java.time.Duration;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ConcurrentMap;
import org.springframework.beans.factory.annotation.Autowired;
import org.springframework.stereotype.Component;

/**
 * The pull port's per-identity limits ({@code registry-cache.rate-limit}): requests per second (a
 * Bucket4j token bucket: {@code burst} tokens, refilled greedily at {@code requests-per-second})
 * and concurrent upstream fills (a resilience4j semaphore {@link Bulkhead} that never waits), for
 * each user and each robot, and for anonymous requests per client address. The limits of an
 * identity live in a bounded Caffeine map ({@code max-tracked} entries, forgotten after {@code
 * idle-expiry} unseen).
 *
 * <p>Refusals are counted as {@code registry_cache_rate_limited_total{identity,limit}}: {@code
 * identity} is {@link Identity#metricLabel()} (a robot's name, else {@code user} or {@code
 * anonymous}: bounded), {@code limit} is {@code requests} or {@code fills}; and {@code
 * identity="unauthenticated", limit="failed-checks"} for the failed-check limit of {@code
 * auth.PullAuthentication}.
 */
@Component
public class RateLimits {

  /** {@code Retry-After} of a refused fill: when one of the identity's fills ends is not known. */
  static final Duration FILL_RETRY_AFTER = Duration.ofSeconds(1);

  private final boolean enabled;
  private final RateLimitProperties settings;
  private final TimeMeter clock;
  private final MeterRegistry meters;
  private final Cache<String, Allowance> allowances;
  private final ConcurrentMap<String, Counter> refusals = new ConcurrentHashMap<>();

  @Autowired
  public RateLimits(RegistryCacheProperties properties, MeterRegistry meters) {
    this(properties.rateLimit(), meters, TimeMeter.SYSTEM_NANOTIME);
  }

  /**
   * @param clock the buckets' time, in nanoseconds from any origin (tests move it by hand)
   */
  RateLimits(RateLimitProperties settings, MeterRegistry meters, TimeMeter clock) {
    this.enabled = settings.enabled();
    this.settings = settings;
    this.clock = clock;
    this.meters = meters == null ? new SimpleMeterRegistry() : meters;
    this.allowances =
        Caffeine.newBuilder()
            .maximumSize(settings.maxTracked())
            .expireAfterAccess(settings.idleExpiry())
            .build();
  }

  /** Whether any limit applies ({@code registry-cache.rate-limit.enabled}). */
  public boolean enabled() {
    return enabled;
  }

  /**
   * Admits one pull request: takes one token of the identity's request bucket.
   *
   * @param identity who the request is from ({@link Identity#ANONYMOUS} when auth is off or it sent
   *     no credentials)
   * @param clientAddress the client's IP address, text; keys anonymous limits (one bucket per
   *     address); {@code null} when unknown (then all such anonymous requests share one)
   * @return the identity's fill permits, to put in the request's Reactor context under {@link
   *     FillPermits#CONTEXT_KEY}
   * @throws RateLimited 429 {@code TOOMANYREQUESTS}, {@code Retry-After} when the bucket has a
   *     token again, when the identity is over its requests per second
   */
  public FillPermits admit(Identity identity, String clientAddress) {
    boolean anonymous = identity.anonymous();
    // A pass-through identity's name is whatever the client typed (the cache cannot check it): its
    // bucket is per client address, with the authenticated limits, so names do not multiply
    // buckets.
    String address = clientAddress == null ? "-" : clientAddress;
    String key =
        anonymous
            ? "anonymous@" + address
            : identity.kind() == Identity.Kind.PASSTHROUGH
                ? "passthrough@" + address
                : identity.toString();
    Allowance allowance =
        allowances.get(
            key,
            k ->
                new Allowance(
                    identity, anonymous ? settings.anonymous() : settings.authenticated()));
    if (allowance.requests != null) {
      ConsumptionProbe probe = allowance.requests.tryConsumeAndReturnRemaining(1);
      if (!probe.isConsumed()) {
        refused(identity, RateLimited.Limit.REQUESTS);
        throw new RateLimited(
            RateLimited.Limit.REQUESTS,
            describe(identity, anonymous)
                + " is over its "
                + allowance.limits.requestsPerSecond()
                + " requests per second (burst "
                + allowance.limits.burst()
                + ")",
            Duration.ofNanos(probe.getNanosToWaitForRefill()));
      }
    }
    return allowance;
  }

  /**
   * Counts a request refused because its client address failed too many credential checks ({@code
   * registry-cache.rate-limit.failed-checks}): {@code identity="unauthenticated"}, {@code
   * limit="failed-checks"}.
   */
  public void failedChecksRefused() {
    refusals
        .computeIfAbsent(
            "unauthenticated|failed-checks", k -> counter("unauthenticated", "failed-checks"))
        .increment();
  }

  private Counter counter(String identity, String limit) {
    return Counter.builder("registry.cache.rate.limited")
        .description("Requests answered 429 by the pull port's limits (registry-cache.rate-limit)")
        .tag("identity", identity)
        .tag("limit", limit)
        .register(meters);
  }

  private static String describe(Identity identity, boolean anonymous) {
    return anonymous ? "anonymous from this address" : identity.toString();
  }

  private void refused(Identity identity, RateLimited.Limit limit) {
    String label = identity.metricLabel();
    refusals
        .computeIfAbsent(label + "|" + limit.label(), k -> counter(label, limit.label()))
        .increment();
  }

  /** The limits of one identity (or anonymous address): a request bucket and a fill bulkhead. */
  private final class Allowance implements FillPermits {
    final Identity identity;
    final RateLimitProperties.Limits limits;

    /** {@code null}: no requests limit. */
    final Bucket requests;

    /** {@code null}: no fills limit. */
    final Bulkhead fills;

    Allowance(Identity identity, RateLimitProperties.Limits limits) {
      this.identity = identity;
      this.limits = limits;
      this.requests =
          limits.requestsPerSecond() == 0
              ? null
              : Bucket.builder()
                  .addLimit(
                      limit ->
                          limit
                              .capacity(limits.burst())
                              .refillGreedy(limits.requestsPerSecond(), Duration.ofSeconds(1)))
                  .withCustomTimePrecision(clock)
                  .build();
      this.fills =
          limits.concurrentFills() == 0
              ? null
              : Bulkhead.of(
                  identity.metricLabel(),
                  BulkheadConfig.custom()
                      .maxConcurrentCalls(limits.concurrentFills())
                      .maxWaitDuration(Duration.ZERO)
                      .writableStackTraceEnabled(false)
                      .build());
    }

    @Override
    public boolean tryAcquire() {
      return fills == null || fills.tryAcquirePermission();
    }

    @Override
    public void release() {
      if (fills != null) {
        fills.onComplete();
      }
    }

    @Override
    public OciException refused() {
      RateLimits.this.refused(identity, RateLimited.Limit.FILLS);
      return new RateLimited(
          RateLimited.Limit.FILLS,
          describe(identity, identity.anonymous())
              + " has "
              + limits.concurrentFills()
              + " upstream fills running, its limit of concurrent fills",
          FILL_RETRY_AFTER);
    }
  }
}
