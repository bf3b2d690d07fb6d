package io.registrycache.auth;

import com.github.benmanes.caffeine.cache.Cache;
import com.github.benmanes.caffeine.cache.Caffeine;
import io.github.bucket4j.Bucket;
import io.github.bucket4j.ConsumptionProbe;
import io.github.bucket4j.TimeMeter;
import io.registrycache.config.RateLimitProperties;
import io.registrycache.oci.OciErrorCode;
import io.registrycache.oci.OciException;
import java.time.Duration;
import java.util.Optional;
import org.springframework.http.HttpStatus;

/**
 * Failed credential checks per client address ({@code registry-cache.rate-limit.failed-checks}): a
 * Bucket4j token bucket per address, {@code burst} tokens refilled greedily at {@code per-minute}.
 * Every check that is not remembered (one that costs a bcrypt) takes a token before it runs, and a
 * check that succeeds gives it back; so only failures use the bucket up, and parallel attempts from
 * one address cannot run more bcrypts than it has tokens. An address with none left is refused
 * before its credentials are looked at.
 */
final class FailedChecks {

  private final Cache<String, Bucket> buckets;
  private final RateLimitProperties.FailedChecks limits;
  private final TimeMeter clock;

  /**
   * @param clock the buckets' time, in nanoseconds from any origin (tests move it by hand)
   */
  FailedChecks(RateLimitProperties settings, TimeMeter clock) {
    this.limits = settings.failedChecks();
    this.clock = clock;
    this.buckets =
        Caffeine.newBuilder()
            .maximumSize(settings.maxTracked())
            .expireAfterAccess(settings.idleExpiry())
            .build();
  }

  /**
   * The limit of the settings, or empty when there is none (rate limits off, or {@code per-minute}
   * 0).
   */
  static Optional<FailedChecks> of(RateLimitProperties settings, TimeMeter clock) {
    return settings.enabled() && settings.failedChecks().perMinute() > 0
        ? Optional.of(new FailedChecks(settings, clock))
        : Optional.empty();
  }

  /**
   * Takes a token for one check from {@code client}.
   *
   * @param client the client's address, text ({@code null}: unknown, all such share one bucket)
   * @throws OciException 429 {@code TOOMANYREQUESTS}, {@code Retry-After} in whole seconds until
   *     the address has a token again, when it has none
   */
  void take(String client) {
    ConsumptionProbe probe = bucket(client).tryConsumeAndReturnRemaining(1);
    if (!probe.isConsumed()) {
      long seconds = Math.max(1, (probe.getNanosToWaitForRefill() + 999_999_999L) / 1_000_000_000L);
      throw new OciException(
          OciErrorCode.TOOMANYREQUESTS,
          HttpStatus.TOO_MANY_REQUESTS,
          "too many failed credential checks from this address: at most "
              + limits.perMinute()
              + " a minute",
          null,
          Duration.ofSeconds(seconds),
          null);
    }
  }

  /** Gives back the token of a check from {@code client} that succeeded. */
  void succeeded(String client) {
    bucket(client).addTokens(1);
  }

  private Bucket bucket(String client) {
    return buckets.get(
        client == null ? "-" : client,
        k ->
            Bucket.builder()
                .addLimit(
                    limit ->
                        limit
                            .capacity(limits.burst())
                            .refillGreedy(limits.perMinute(), Duration.ofMinutes(1)))
                .withCustomTimePrecision(clock)
                .build());
  }
}
