package io.registrycache.upstream;

import io.netty.channel.ConnectTimeoutException;
import io.netty.handler.timeout.TimeoutException;
import io.registrycache.oci.OciErrorCode;
import java.net.ConnectException;
import java.net.NoRouteToHostException;
import java.net.SocketTimeoutException;
import java.net.UnknownHostException;
import java.nio.channels.UnresolvedAddressException;
import java.time.Clock;
import java.time.Duration;
import java.time.Instant;
import java.time.ZonedDateTime;
import java.time.format.DateTimeFormatter;
import java.time.format.DateTimeParseException;
import java.util.Locale;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import javax.net.ssl.SSLException;
import org.springframework.http.HttpStatus;
import reactor.netty.http.client.PrematureCloseException;

/**
 * Turns upstream answers and transport failures into {@link UpstreamException}s, following the
 * mapping documented on {@link UpstreamClient}. Pure functions; every message names the upstream
 * (key and URL) and the reason.
 */
final class UpstreamErrors {

  /** Metric outcomes ({@code outcome} tag of {@code registry.cache.upstream.request}). */
  static final String SUCCESS = "success";
  static final String NOT_FOUND = "not_found";
  static final String CLIENT_ERROR = "client_error";
  static final String SERVER_ERROR = "server_error";
  static final String TIMEOUT = "timeout";
  static final String UNREACHABLE = "unreachable";

  private static final Pattern ERROR_CODE = Pattern.compile("\"code\"\\s*:\\s*\"([A-Z_]{1,64})\"");
  private static final Pattern ERROR_MESSAGE = Pattern.compile("\"message\"\\s*:\\s*\"([^\"]{0,200})");

  private UpstreamErrors() {}

  /** {@code upstream 'key' (url)}: the prefix of every message. */
  static String name(Upstream upstream) {
    return "upstream '" + upstream.key() + "' (" + upstream.url() + ")";
  }

  /**
   * The error for a non-success HTTP status of the upstream.
   *
   * @param what the thing asked for, e.g. {@code manifest library/alpine:3.20}
   * @param notFound the code for a 404: {@code MANIFEST_UNKNOWN}, {@code BLOB_UNKNOWN} or {@code
   *     NAME_UNKNOWN}
   * @param retryAfter the {@code Retry-After} header, or {@code null}
   * @param errorBody the start of the upstream's error body (OCI error JSON), or {@code null}
   */
  static UpstreamException fromStatus(
      Upstream upstream,
      String what,
      OciErrorCode notFound,
      int status,
      String retryAfter,
      String errorBody,
      Clock clock) {
    String reason = status + describe(errorBody);
    String prefix = name(upstream) + ": ";
    if (status == 404) {
      return new UpstreamException(
          upstream.key(), notFound, HttpStatus.NOT_FOUND, prefix + what + " not found (" + reason + ")", null, null, status);
    }
    if (status == 401) {
      return new UpstreamException(
          upstream.key(), OciErrorCode.UNAUTHORIZED, HttpStatus.UNAUTHORIZED,
          prefix + "not authorized for " + what + " even after authenticating (" + reason
              + "); check the configured credentials",
          null, null, status);
    }
    if (status == 403) {
      return new UpstreamException(
          upstream.key(), OciErrorCode.DENIED, HttpStatus.FORBIDDEN,
          prefix + "access to " + what + " denied (" + reason + ")", null, null, status);
    }
    if (status == 429) {
      return new UpstreamException(
          upstream.key(), OciErrorCode.TOOMANYREQUESTS, HttpStatus.TOO_MANY_REQUESTS,
          prefix + "rate limit reached fetching " + what + " (" + reason + ")",
          parseRetryAfter(retryAfter, clock), null, status);
    }
    if (status == 503) {
      return new UpstreamException(
          upstream.key(), OciErrorCode.UPSTREAM_UNAVAILABLE, HttpStatus.SERVICE_UNAVAILABLE,
          prefix + "unavailable fetching " + what + " (" + reason + ")",
          parseRetryAfter(retryAfter, clock), null, status);
    }
    String kind = status >= 500 ? "failed" : "answered unexpectedly";
    return new UpstreamException(
        upstream.key(), OciErrorCode.UPSTREAM_UNAVAILABLE, HttpStatus.BAD_GATEWAY,
        prefix + kind + " fetching " + what + " (" + reason + ")", null, null, status);
  }

  /** The error for a transport failure: refused, unresolvable, timed out, TLS, cut off. */
  static UpstreamException fromTransport(Upstream upstream, String what, Throwable failure) {
    if (failure instanceof UpstreamException e) {
      return e;
    }
    String prefix = name(upstream) + ": ";
    // Reactor Netty shades reactor-pool: match its exceptions by simple name, not the internal type.
    if (hasNamed(failure, "PoolAcquireTimeoutException")
        || hasNamed(failure, "PoolAcquirePendingLimitException")) {
      return new UpstreamException(
          upstream.key(), OciErrorCode.UPSTREAM_UNAVAILABLE, HttpStatus.SERVICE_UNAVAILABLE,
          prefix + "too many requests in flight (max-concurrent-requests "
              + upstream.settings().getMaxConcurrentRequests() + ") fetching " + what,
          null, failure);
    }
    if (has(failure, TimeoutException.class)
        || has(failure, ConnectTimeoutException.class)
        || has(failure, SocketTimeoutException.class)
        || has(failure, java.util.concurrent.TimeoutException.class)) {
      return new UpstreamException(
          upstream.key(), OciErrorCode.UPSTREAM_UNAVAILABLE, HttpStatus.GATEWAY_TIMEOUT,
          prefix + "timed out fetching " + what + " (" + timeoutKind(upstream, failure) + ")",
          null, failure);
    }
    if (has(failure, UnknownHostException.class) || has(failure, UnresolvedAddressException.class)) {
      return new UpstreamException(
          upstream.key(), OciErrorCode.UPSTREAM_UNAVAILABLE, HttpStatus.BAD_GATEWAY,
          prefix + "unknown host fetching " + what, null, failure);
    }
    if (has(failure, ConnectException.class) || has(failure, NoRouteToHostException.class)) {
      return new UpstreamException(
          upstream.key(), OciErrorCode.UPSTREAM_UNAVAILABLE, HttpStatus.BAD_GATEWAY,
          prefix + "unreachable fetching " + what + " (connection refused or no route)", null, failure);
    }
    if (has(failure, SSLException.class)) {
      return new UpstreamException(
          upstream.key(), OciErrorCode.UPSTREAM_UNAVAILABLE, HttpStatus.BAD_GATEWAY,
          prefix + "TLS failed fetching " + what + " (" + rootMessage(failure)
              + "); check tls.ca-file / tls.cert-file",
          null, failure);
    }
    if (has(failure, PrematureCloseException.class)) {
      return new UpstreamException(
          upstream.key(), OciErrorCode.UPSTREAM_UNAVAILABLE, HttpStatus.BAD_GATEWAY,
          prefix + "closed the connection early fetching " + what, null, failure);
    }
    return new UpstreamException(
        upstream.key(), OciErrorCode.UPSTREAM_UNAVAILABLE, HttpStatus.BAD_GATEWAY,
        prefix + "failed fetching " + what + " (" + rootMessage(failure) + ")", null, failure);
  }

  /** The {@code outcome} tag for a failure. */
  static String outcome(Throwable failure) {
    if (failure instanceof UpstreamException e) {
      if (e.status() == HttpStatus.NOT_FOUND) {
        return NOT_FOUND;
      }
      if (e.status() == HttpStatus.GATEWAY_TIMEOUT) {
        return TIMEOUT;
      }
      Throwable cause = e.getCause();
      if (cause != null
          && (has(cause, ConnectException.class)
              || has(cause, UnknownHostException.class)
              || has(cause, NoRouteToHostException.class))) {
        return UNREACHABLE;
      }
      return e.status().is5xxServerError() ? SERVER_ERROR : CLIENT_ERROR;
    }
    return SERVER_ERROR;
  }

  /**
   * Parses {@code Retry-After} (RFC 9110 section 10.2.3): either delay-seconds or an HTTP-date
   * (IMF-fixdate, section 5.6.7). A date in the past gives zero.
   *
   * @return the delay, or {@code null} when absent or unparsable
   */
  static Duration parseRetryAfter(String value, Clock clock) {
    if (value == null || value.isBlank()) {
      return null;
    }
    String v = value.trim();
    if (v.chars().allMatch(Character::isDigit)) {
      try {
        return Duration.ofSeconds(Long.parseLong(v));
      } catch (NumberFormatException e) {
        return null; // absurdly long
      }
    }
    try {
      Instant at = ZonedDateTime.parse(v, DateTimeFormatter.RFC_1123_DATE_TIME).toInstant();
      Duration delay = Duration.between(clock.instant(), at);
      return delay.isNegative() ? Duration.ZERO : delay;
    } catch (DateTimeParseException e) {
      return null;
    }
  }

  /** {@code ": CODE message"} from an OCI error body, or the empty string. */
  static String describe(String errorBody) {
    if (errorBody == null || errorBody.isBlank()) {
      return "";
    }
    StringBuilder sb = new StringBuilder();
    Matcher code = ERROR_CODE.matcher(errorBody);
    if (code.find()) {
      sb.append(' ').append(code.group(1));
      Matcher message = ERROR_MESSAGE.matcher(errorBody);
      if (message.find(code.start()) || message.find(0)) {
        sb.append(": ").append(message.group(1));
      }
    }
    return sb.length() == 0 ? "" : sb.toString();
  }

  static boolean has(Throwable t, Class<? extends Throwable> type) {
    for (Throwable c = t; c != null; c = c.getCause() == c ? null : c.getCause()) {
      if (type.isInstance(c)) {
        return true;
      }
    }
    return false;
  }

  private static boolean hasNamed(Throwable t, String simpleName) {
    for (Throwable c = t; c != null; c = c.getCause() == c ? null : c.getCause()) {
      if (c.getClass().getSimpleName().equals(simpleName)) {
        return true;
      }
    }
    return false;
  }

  private static String timeoutKind(Upstream upstream, Throwable failure) {
    if (has(failure, ConnectTimeoutException.class)) {
      return "no connection within connect-timeout " + upstream.settings().getConnectTimeout();
    }
    return "no data within read-timeout " + upstream.settings().getReadTimeout();
  }

  static String rootMessage(Throwable t) {
    Throwable root = t;
    while (root.getCause() != null && root.getCause() != root) {
      root = root.getCause();
    }
    String message = root.getMessage();
    return root.getClass().getSimpleName() + (message == null ? "" : ": " + abbreviate(message));
  }

  private static String abbreviate(String s) {
    String oneLine = s.replace('\n', ' ').replace('\r', ' ');
    return oneLine.length() <= 200 ? oneLine : oneLine.substring(0, 200) + "...";
  }

  static String lower(String s) {
    return s.toLowerCase(Locale.ROOT);
  }
}
