package io.registrycache.upstream;

import io.registrycache.oci.Json;
import io.registrycache.oci.OciErrorCode;
import java.time.Clock;
import java.time.Duration;
import java.time.Instant;
import java.time.ZonedDateTime;
import java.time.format.DateTimeFormatter;
import java.time.format.DateTimeParseException;
import java.util.Locale;
import org.springframework.http.HttpStatus;
import tools.jackson.core.JacksonException;
import tools.jackson.databind.JsonNode;
import tools.jackson.databind.json.JsonMapper;

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

  private static final JsonMapper JSON = Json.MAPPER;

  private UpstreamErrors() {}

  /** {@code UPSTREAM_UNAVAILABLE} (502) with {@code message} after the upstream's name. */
  static UpstreamException unavailable(Upstream upstream, String message, Throwable cause) {
    return new UpstreamException(
        upstream.key(),
        OciErrorCode.UPSTREAM_UNAVAILABLE,
        HttpStatus.BAD_GATEWAY,
        UpstreamErrors.name(upstream) + ": " + message,
        null,
        cause);
  }

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
          upstream.key(),
          notFound,
          HttpStatus.NOT_FOUND,
          prefix + what + " not found (" + reason + ")",
          null,
          null,
          status);
    }
    if (status == 401) {
      return new UpstreamException(
          upstream.key(),
          OciErrorCode.UNAUTHORIZED,
          HttpStatus.UNAUTHORIZED,
          prefix
              + "not authorized for "
              + what
              + " even after authenticating ("
              + reason
              + (upstream.passthrough()
                  ? "); the upstream refuses the client's own credentials (credentials: passthrough)"
                  : "); check the configured credentials"),
          null,
          null,
          status);
    }
    if (status == 403) {
      return new UpstreamException(
          upstream.key(),
          OciErrorCode.DENIED,
          HttpStatus.FORBIDDEN,
          prefix + "access to " + what + " denied (" + reason + ")",
          null,
          null,
          status);
    }
    if (status == 429) {
      return new UpstreamException(
          upstream.key(),
          OciErrorCode.TOOMANYREQUESTS,
          HttpStatus.TOO_MANY_REQUESTS,
          prefix + "rate limit reached fetching " + what + " (" + reason + ")",
          parseRetryAfter(retryAfter, clock),
          null,
          status);
    }
    if (status == 503) {
      return new UpstreamException(
          upstream.key(),
          OciErrorCode.UPSTREAM_UNAVAILABLE,
          HttpStatus.SERVICE_UNAVAILABLE,
          prefix + "unavailable fetching " + what + " (" + reason + ")",
          parseRetryAfter(retryAfter, clock),
          null,
          status);
    }
    String kind = status >= 500 ? "failed" : "answered unexpectedly";
    return new UpstreamException(
        upstream.key(),
        OciErrorCode.UPSTREAM_UNAVAILABLE,
        HttpStatus.BAD_GATEWAY,
        prefix + kind + " fetching " + what + " (" + reason + ")",
        null,
        null,
        status);
  }

  /** The error for a transport failure: refused, unresolvable, timed out, TLS, cut off. */
  static UpstreamException fromTransport(Upstream upstream, String what, Throwable failure) {
    if (failure instanceof UpstreamException e) {
      return e;
    }
    UpstreamAddressPolicy.Refused refused =
        TransportFailure.find(failure, UpstreamAddressPolicy.Refused.class);
    if (refused != null) {
      return refused
          .error; // refused by the redirect policy when connecting: not a transport failure
    }
    String prefix = name(upstream) + ": ";
    var settings = upstream.settings();
    return switch (TransportFailure.of(failure)) {
      case LOCAL_LIMIT ->
          new UpstreamException(
              upstream.key(),
              OciErrorCode.UPSTREAM_UNAVAILABLE,
              HttpStatus.SERVICE_UNAVAILABLE,
              prefix
                  + "too many requests in flight (max-concurrent-requests "
                  + settings.maxConcurrentRequests()
                  + ") fetching "
                  + what,
              null,
              failure);
      case SLOW_TRANSFER ->
          new UpstreamException(
              upstream.key(),
              OciErrorCode.UPSTREAM_UNAVAILABLE,
              HttpStatus.GATEWAY_TIMEOUT,
              prefix
                  + "timed out fetching "
                  + what
                  + " ("
                  + TransportFailure.root(failure).getMessage()
                  + ")",
              null,
              failure);
      case CONNECT_TIMEOUT ->
          new UpstreamException(
              upstream.key(),
              OciErrorCode.UPSTREAM_UNAVAILABLE,
              HttpStatus.GATEWAY_TIMEOUT,
              prefix
                  + "timed out fetching "
                  + what
                  + " (no connection within connect-timeout "
                  + settings.connectTimeout()
                  + ")",
              null,
              failure);
      case READ_TIMEOUT ->
          new UpstreamException(
              upstream.key(),
              OciErrorCode.UPSTREAM_UNAVAILABLE,
              HttpStatus.GATEWAY_TIMEOUT,
              prefix
                  + "timed out fetching "
                  + what
                  + " (no data within read-timeout "
                  + settings.readTimeout()
                  + ")",
              null,
              failure);
      case UNKNOWN_HOST ->
          new UpstreamException(
              upstream.key(),
              OciErrorCode.UPSTREAM_UNAVAILABLE,
              HttpStatus.BAD_GATEWAY,
              prefix + "unknown host fetching " + what,
              null,
              failure);
      case UNREACHABLE ->
          new UpstreamException(
              upstream.key(),
              OciErrorCode.UPSTREAM_UNAVAILABLE,
              HttpStatus.BAD_GATEWAY,
              prefix + "unreachable fetching " + what + " (connection refused or no route)",
              null,
              failure);
      case TLS ->
          new UpstreamException(
              upstream.key(),
              OciErrorCode.UPSTREAM_UNAVAILABLE,
              HttpStatus.BAD_GATEWAY,
              prefix
                  + "TLS failed fetching "
                  + what
                  + " ("
                  + rootMessage(failure)
                  + "); check tls.ca-file / tls.cert-file",
              null,
              failure);
      case CLOSED_EARLY ->
          new UpstreamException(
              upstream.key(),
              OciErrorCode.UPSTREAM_UNAVAILABLE,
              HttpStatus.BAD_GATEWAY,
              prefix + "closed the connection early fetching " + what,
              null,
              failure);
      case IO, OTHER ->
          new UpstreamException(
              upstream.key(),
              OciErrorCode.UPSTREAM_UNAVAILABLE,
              HttpStatus.BAD_GATEWAY,
              prefix + "failed fetching " + what + " (" + rootMessage(failure) + ")",
              null,
              failure);
    };
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
      if (e.getCause() != null) {
        TransportFailure kind = TransportFailure.of(e.getCause());
        if (kind == TransportFailure.UNREACHABLE || kind == TransportFailure.UNKNOWN_HOST) {
          return UNREACHABLE;
        }
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

  /**
   * {@code ": CODE message"} of the first entry of an OCI error body ({@code {"errors":[{"code":
   * …,"message":…}]}}), or the empty string when the body is not one (HTML, truncated, empty).
   */
  static String describe(String errorBody) {
    if (errorBody == null || errorBody.isBlank()) {
      return "";
    }
    JsonNode first;
    try {
      first = JSON.readTree(errorBody).path("errors").path(0);
    } catch (JacksonException e) {
      return "";
    }
    JsonNode code = first.get("code");
    if (code == null || !code.isString() || code.stringValue().isBlank()) {
      return "";
    }
    JsonNode message = first.get("message");
    return " "
        + abbreviate(code.stringValue())
        + (message != null && message.isString() && !message.stringValue().isBlank()
            ? ": " + abbreviate(message.stringValue())
            : "");
  }

  static String rootMessage(Throwable t) {
    Throwable root = TransportFailure.root(t);
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
