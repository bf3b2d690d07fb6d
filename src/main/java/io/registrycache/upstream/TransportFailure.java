package io.registrycache.upstream;

import io.netty.channel.ConnectTimeoutException;
import io.netty.handler.timeout.TimeoutException;
import java.io.IOException;
import java.net.ConnectException;
import java.net.NoRouteToHostException;
import java.net.SocketTimeoutException;
import java.net.UnknownHostException;
import java.nio.channels.UnresolvedAddressException;
import java.util.function.Predicate;
import javax.net.ssl.SSLException;
import reactor.netty.http.client.PrematureCloseException;

/**
 * The one classification of a failure to exchange with an upstream (not an HTTP status): used for
 * the error the client sees ({@link UpstreamErrors#fromTransport}), for retries and the circuit
 * breaker ({@link UpstreamFailures}) and for the metric outcome. Earlier entries win when the cause
 * chain holds several kinds.
 */
enum TransportFailure {
  /** Our own {@code max-concurrent-requests} queue was full or waited too long. */
  LOCAL_LIMIT,
  /** A response body arrived slower than {@code min-transfer-rate}. */
  SLOW_TRANSFER,
  /** No TCP connection within {@code connect-timeout}. */
  CONNECT_TIMEOUT,
  /** No data within {@code read-timeout}, or a whole token request too slow. */
  READ_TIMEOUT,
  /** The host name does not resolve. */
  UNKNOWN_HOST,
  /** Connection refused or no route to the host. */
  UNREACHABLE,
  /** TLS handshake or certificate failure. */
  TLS,
  /** The upstream closed the connection before the response was complete. */
  CLOSED_EARLY,
  /** Another I/O failure (reset connection and the like). */
  IO,
  /** Anything else. */
  OTHER;

  /** Classifies {@code failure} by walking its cause chain. */
  static TransportFailure of(Throwable failure) {
    // Reactor Netty shades reactor-pool: match its exceptions by simple name, not the internal
    // type.
    if (has(failure, c -> c.getClass().getSimpleName().startsWith("PoolAcquire"))) {
      return LOCAL_LIMIT;
    }
    if (has(failure, SlowTransferException.class::isInstance)) {
      return SLOW_TRANSFER;
    }
    if (has(failure, ConnectTimeoutException.class::isInstance)) {
      return CONNECT_TIMEOUT;
    }
    if (has(
        failure,
        c ->
            c instanceof TimeoutException
                || c instanceof SocketTimeoutException
                || c instanceof java.util.concurrent.TimeoutException)) {
      return READ_TIMEOUT;
    }
    if (has(
        failure,
        c -> c instanceof UnknownHostException || c instanceof UnresolvedAddressException)) {
      return UNKNOWN_HOST;
    }
    if (has(failure, c -> c instanceof ConnectException || c instanceof NoRouteToHostException)) {
      return UNREACHABLE;
    }
    if (has(failure, SSLException.class::isInstance)) {
      return TLS;
    }
    if (has(failure, PrematureCloseException.class::isInstance)) {
      return CLOSED_EARLY;
    }
    if (has(failure, IOException.class::isInstance)) {
      return IO;
    }
    return OTHER;
  }

  /** Whether {@code t} or one of its causes matches. */
  static boolean has(Throwable t, Predicate<Throwable> test) {
    return first(t, test) != null;
  }

  /** {@code t} or its first cause of {@code type}, or {@code null}. */
  static <T extends Throwable> T find(Throwable t, Class<T> type) {
    return type.cast(first(t, type::isInstance));
  }

  /** The one walk of a cause chain in this package. */
  @SuppressWarnings("ReferenceEquality") // a cause that is the throwable itself ends the walk
  private static Throwable first(Throwable t, Predicate<Throwable> test) {
    for (Throwable c = t; c != null; c = c.getCause() == c ? null : c.getCause()) {
      if (test.test(c)) {
        return c;
      }
    }
    return null;
  }

  /** The innermost cause. */
  @SuppressWarnings("ReferenceEquality") // a cause that is the throwable itself ends the walk
  static Throwable root(Throwable t) {
    Throwable root = t;
    while (root.getCause() != null && root.getCause() != root) {
      root = root.getCause();
    }
    return root;
  }

  /** A response body slower than {@code min-transfer-rate}. */
  static final class SlowTransferException extends IOException {
    SlowTransferException(String message) {
      super(message);
    }
  }
}
