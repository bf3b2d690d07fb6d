package io.registrycache.config;

import java.time.Duration;
import org.springframework.boot.context.properties.ConfigurationProperties;
import org.springframework.boot.context.properties.bind.DefaultValue;

/**
 * {@code registry-cache.rate-limit.*}: per-identity limits on the pull port (docs/security.md,
 * "Rate limits"), so one noisy client cannot burn the organisation's upstream quota. Off by
 * default; when off, a request costs one boolean check. A request over a limit is answered 429
 * {@code TOOMANYREQUESTS} (OCI Distribution Spec v1.1, "Error Codes") with {@code Retry-After} in
 * whole seconds. Works with or without {@code registry-cache.auth.enabled}: without it every client
 * is anonymous, and anonymous limits are per client address.
 *
 * @param enabled whether any limit applies; default false
 * @param authenticated the limits of each user (htpasswd) and each robot (tokens file), each its
 *     own: default 50 requests per second, a burst of 200, 8 concurrent fills
 * @param anonymous the limits of requests without credentials, per client address (the TCP peer, or
 *     the forwarded address with {@code server.forward-headers-strategy}): default 20 requests per
 *     second, a burst of 100, 4 concurrent fills
 * @param failedChecks failed credential checks (each costs a bcrypt) per client address: default 10
 *     per minute, a burst of 10; a client address over it gets 429 before its credentials are
 *     checked at all. Applies only with {@code registry-cache.auth.enabled}
 * @param maxTracked how many identities and client addresses have limits tracked at once (a bounded
 *     map; the least recently seen are forgotten, and so start afresh); default 100000
 * @param idleExpiry how long the limits of an identity or address not seen are kept; default 10
 *     minutes (longer than any refill, so forgetting gives no one more than a full bucket; a
 *     forgotten identity's fill count starts at zero, fills it still has running left out)
 */
@ConfigurationProperties("registry-cache.rate-limit")
public record RateLimitProperties(
    @DefaultValue("false") boolean enabled,
    @DefaultValue Limits authenticated,
    @DefaultValue Limits anonymous,
    @DefaultValue FailedChecks failedChecks,
    @DefaultValue("100000") int maxTracked,
    @DefaultValue("10m") Duration idleExpiry) {

  public RateLimitProperties {
    authenticated = authenticated.withDefaults(50, 200, 8);
    anonymous = anonymous.withDefaults(20, 100, 4);
    if (maxTracked < 1) {
      throw new IllegalArgumentException(
          "registry-cache.rate-limit.max-tracked must be at least 1");
    }
    if (idleExpiry.isNegative() || idleExpiry.isZero()) {
      throw new IllegalArgumentException("registry-cache.rate-limit.idle-expiry must be positive");
    }
  }

  /**
   * The limits of one identity (or one anonymous client address).
   *
   * @param requestsPerSecond pull requests ({@code /v2/<name>/...}: manifests, blobs, tags,
   *     referrers; not {@code /v2/} nor {@code /v2/token}) per second, refilled continuously (a
   *     token bucket); 0 = unlimited
   * @param burst how many requests may come at once after a quiet spell (the bucket's capacity); at
   *     least {@code requests-per-second}; 0, or unset when {@code requests-per-second} is set: as
   *     many as {@code requests-per-second}
   * @param concurrentFills upstream fills (a manifest fetch or a blob download this identity's
   *     request started; not a request served from the cache, nor one that joined a fill running
   *     already) running at once; 0 = unlimited
   */
  public record Limits(Integer requestsPerSecond, Integer burst, Integer concurrentFills) {

    /**
     * These limits, each unset one at its default; {@code burst} 0 or unset with the rate set: the
     * rate.
     */
    Limits withDefaults(int requestsPerSecond, int burst, int concurrentFills) {
      int rate = this.requestsPerSecond == null ? requestsPerSecond : this.requestsPerSecond;
      int capacity =
          this.burst == null ? (this.requestsPerSecond == null ? burst : rate) : this.burst;
      int fills = this.concurrentFills == null ? concurrentFills : this.concurrentFills;
      if (rate < 0 || capacity < 0 || fills < 0) {
        throw new IllegalArgumentException(
            "registry-cache.rate-limit: requests-per-second, burst and concurrent-fills must not be negative");
      }
      if (capacity == 0) {
        capacity = rate;
      }
      if (capacity < rate) {
        throw new IllegalArgumentException(
            "registry-cache.rate-limit: burst ("
                + capacity
                + ") must be at least requests-per-second ("
                + rate
                + ")");
      }
      return new Limits(rate, capacity, fills);
    }
  }

  /**
   * The limit on failed credential checks per client address.
   *
   * @param perMinute failed checks per minute, refilled continuously; 0 = unlimited
   * @param burst how many may fail at once after a quiet spell; 0 = as many as {@code per-minute}
   */
  public record FailedChecks(@DefaultValue("10") int perMinute, @DefaultValue("10") int burst) {

    public FailedChecks {
      if (perMinute < 0 || burst < 0) {
        throw new IllegalArgumentException(
            "registry-cache.rate-limit.failed-checks: values must not be negative");
      }
      if (burst == 0) {
        burst = perMinute;
      }
    }
  }
}
