package io.registrycache.ratelimit;

import io.registrycache.oci.OciErrorCode;
import io.registrycache.oci.OciException;
import java.time.Duration;
import java.util.Locale;
import org.springframework.http.HttpStatus;

/**
 * 429 {@code TOOMANYREQUESTS} (OCI Distribution Spec v1.1, "Error Codes") for a request over one of
 * its identity's limits ({@code registry-cache.rate-limit}); the response carries {@code
 * Retry-After} in whole seconds, at least 1 (RFC 9110 10.2.3).
 */
public class RateLimited extends OciException {

  /** Which limit was reached. */
  public enum Limit {
    /** {@code requests-per-second} (with its {@code burst}). */
    REQUESTS,
    /** {@code concurrent-fills}. */
    FILLS;

    /** The {@code limit} label of {@code registry_cache_rate_limited_total}. */
    public String label() {
      return name().toLowerCase(Locale.ROOT);
    }
  }

  private final Limit limit;

  /**
   * @param retryAfter how long until the request may succeed; rounded up to whole seconds, at least
   *     1
   */
  public RateLimited(Limit limit, String message, Duration retryAfter) {
    super(
        OciErrorCode.TOOMANYREQUESTS,
        HttpStatus.TOO_MANY_REQUESTS,
        message,
        null,
        wholeSeconds(retryAfter),
        null);
    this.limit = limit;
  }

  public Limit limit() {
    return limit;
  }

  /** {@code wait} rounded up to whole seconds, at least one. */
  static Duration wholeSeconds(Duration wait) {
    long nanos = Math.max(0, wait.toNanos());
    long seconds = (nanos + 999_999_999L) / 1_000_000_000L;
    return Duration.ofSeconds(Math.max(1, seconds));
  }

  @Override
  public synchronized Throwable fillInStackTrace() {
    return this; // an answer, not a fault: no stack to walk per refused request
  }
}
