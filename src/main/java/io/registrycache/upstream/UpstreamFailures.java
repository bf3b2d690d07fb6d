package io.registrycache.upstream;

import io.github.resilience4j.circuitbreaker.CallNotPermittedException;
import io.registrycache.oci.OciException;
import java.time.Duration;

/**
 * What an upstream failure means for retries and for the circuit breaker (see {@code
 * docs/resilience.md}). Pure functions.
 */
final class UpstreamFailures {

  /** The kinds of outcome, from the point of view of retries and the breaker. */
  enum Kind {
    /**
     * The upstream answered (404, 401, 403, other 4xx, or an answer we reject: bad digest, too
     * large, too many redirects): a success for the breaker, never retried.
     */
    ANSWERED(false, false, false),
    /** 429: passed on at once with its {@code Retry-After}; ignored by the breaker. */
    RATE_LIMITED(false, false, true),
    /** Our own limit ({@code max-concurrent-requests} queue full or waited too long): ignored. */
    LOCAL_LIMIT(false, false, true),
    /**
     * Refused, reset or early-closed connection, connect timeout, unknown host, upstream
     * 502/503/504: retried, a failure for the breaker.
     */
    TRANSIENT(true, true, false),
    /**
     * A failure worth counting but not worth repeating at once: read timeout (the upstream already
     * had {@code read-timeout}), other 5xx, TLS failure, 503 asking to wait longer than {@code
     * max-backoff}.
     */
    FAILED(false, true, false),
    /** The breaker refused the call (open): not retried. */
    REJECTED(false, false, true);

    final boolean retry;
    final boolean breakerFailure;
    final boolean breakerIgnores;

    Kind(boolean retry, boolean breakerFailure, boolean breakerIgnores) {
      this.retry = retry;
      this.breakerFailure = breakerFailure;
      this.breakerIgnores = breakerIgnores;
    }
  }

  private UpstreamFailures() {}

  /**
   * @param maxBackoff a 503 asking (by {@code Retry-After}) for a longer wait than this is not
   *     retried
   */
  static Kind classify(Throwable failure, Duration maxBackoff) {
    if (TransportFailure.has(failure, CallNotPermittedException.class::isInstance)) {
      return Kind.REJECTED;
    }
    if (!(failure instanceof UpstreamException e)) {
      return of(TransportFailure.of(failure)); // not mapped (should not happen): judge by the cause
    }
    int status = e.upstreamStatus();
    if (status != 0) {
      if (status == 429) {
        return Kind.RATE_LIMITED;
      }
      if (status == 502 || status == 504) {
        return Kind.TRANSIENT;
      }
      if (status == 503) {
        boolean waitLonger = e.retryAfter().map(d -> d.compareTo(maxBackoff) > 0).orElse(false);
        return waitLonger ? Kind.FAILED : Kind.TRANSIENT;
      }
      return status >= 500 ? Kind.FAILED : Kind.ANSWERED;
    }
    if (e.getCause() == null || e.getCause() instanceof OciException) {
      return Kind
          .ANSWERED; // a rejected answer (bad digest, redirects, size), not a transport failure
    }
    return of(TransportFailure.of(e.getCause()));
  }

  /** What a transport failure means for retries and the breaker. */
  static Kind of(TransportFailure failure) {
    return switch (failure) {
      case LOCAL_LIMIT -> Kind.LOCAL_LIMIT;
      // no answer within read-timeout (or a whole token request too slow), or a body slower than
      // min-transfer-rate: repeating would multiply the wait a client sees, while the cache could
      // already serve its stale copy
      case READ_TIMEOUT, SLOW_TRANSFER -> Kind.FAILED;
      case TLS -> Kind.FAILED; // certificate or protocol problem: does not heal in 200 ms
      // refused, reset, early close, connect timeout, unknown host
      case CONNECT_TIMEOUT, UNKNOWN_HOST, UNREACHABLE, CLOSED_EARLY, IO -> Kind.TRANSIENT;
      case OTHER -> Kind.FAILED;
    };
  }
}
