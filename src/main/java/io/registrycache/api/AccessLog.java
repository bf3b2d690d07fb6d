package io.registrycache.api;

import io.registrycache.auth.Identity;
import io.registrycache.config.AccessLogProperties;
import io.registrycache.proxy.CacheOutcome;
import java.util.Locale;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import org.springframework.stereotype.Component;

/**
 * The structured access log, written by the pull route ({@link PullRoute}) and, for the requests
 * WebFlux serves, by {@link AccessLogFilter}; on when {@code
 * registry-cache.access-log.enabled=true}: one line per {@code /v2} request on the logger {@code
 * registry-cache.access}, at INFO, key=value:
 *
 * <pre>
 * method=GET path=/v2/library/alpine/blobs/sha256:... status=200 bytes=3623807 duration_ms=12 cache=hit upstream=local identity=robot:ci
 * </pre>
 *
 * <ul>
 *   <li>{@code bytes}: the response's {@code Content-Length} (what was declared, not counted —
 *       counting would cost the zero-copy transfer of stored blobs); {@code -} when the length was
 *       not known in advance (a blob streamed while its download runs)
 *   <li>{@code duration_ms}: from the request's arrival to the end of the response body
 *   <li>{@code cache}: {@code hit|miss|stale|error}, recorded by the proxy services through the
 *       Reactor context ({@link CacheOutcome}); {@code -} for requests that reach no cache, such as
 *       {@code /v2/} or a malformed name (then {@code error} when the status is 4xx/5xx)
 *   <li>{@code upstream}: the upstream's configuration key, or {@code -}
 *   <li>{@code identity} (last, after {@code kind} and {@code outcome}): who the request is from,
 *       with {@code registry-cache.auth.enabled}: {@code user:<name>}, {@code robot:<name>} or
 *       {@code anonymous} ({@link Identity#logName()}: a name, never a password or token); {@code
 *       -} when auth is off or the credentials were refused. A name with characters beyond letters,
 *       digits and {@code ._@:-} is quoted, {@code "} and {@code \} escaped
 *   <li>{@code kind=referrers} is added to referrers API requests
 *   <li>{@code outcome=cancelled} is added when the client went away before the end
 * </ul>
 *
 * The query string is not logged (it may carry {@code ns=}, and nothing else of use).
 */
@Component
public class AccessLog {

  /** The logger name; route it to its own appender in the logging configuration if wanted. */
  public static final String LOGGER = "registry-cache.access";

  private static final Logger log = LoggerFactory.getLogger(LOGGER);

  private final boolean enabled;

  public AccessLog(AccessLogProperties properties) {
    this.enabled = properties.enabled();
  }

  /** Whether the setting is on ({@code registry-cache.access-log.enabled}). */
  public boolean configured() {
    return enabled;
  }

  /** Whether lines are written (the setting is on and the logger takes INFO). */
  public boolean enabled() {
    return enabled && log.isInfoEnabled();
  }

  /**
   * Writes the line of one request, when {@link #enabled()}.
   *
   * @param path the raw path, without the query string
   * @param status the response's status code
   * @param contentLength the declared {@code Content-Length}, -1 when none
   * @param startedNanos {@link System#nanoTime()} at the request's arrival
   * @param outcome what the proxy services recorded, or {@code null}
   * @param cancelled whether the client went away before the end
   * @param identity who asked, or {@code null} when auth is off or the credentials were refused
   */
  public void write(
      String method,
      String path,
      int status,
      long contentLength,
      long startedNanos,
      CacheOutcome outcome,
      boolean cancelled,
      Identity identity) {
    if (!enabled()) {
      return;
    }
    String cache;
    if (outcome != null && outcome.result() != null) {
      cache = outcome.result().name().toLowerCase(Locale.ROOT);
    } else {
      cache = status >= 400 ? "error" : "-";
    }
    String line =
        "method="
            + method
            + " path="
            + path
            + " status="
            + status
            + " bytes="
            + (contentLength >= 0 ? Long.toString(contentLength) : "-")
            + " duration_ms="
            + (System.nanoTime() - startedNanos) / 1_000_000
            + " cache="
            + cache
            + " upstream="
            + (outcome == null || outcome.upstream() == null ? "-" : outcome.upstream())
            + (path.contains("/referrers/") ? " kind=referrers" : "")
            + (cancelled ? " outcome=cancelled" : "")
            + " identity="
            + (identity == null ? "-" : value(identity.logName()));
    log.info(line);
  }

  /**
   * {@code text} as a key=value value: as it is when plain, else quoted with {@code "} and {@code
   * \} escaped.
   */
  static String value(String text) {
    boolean plain =
        !text.isEmpty()
            && text.chars()
                .allMatch(
                    c ->
                        (c >= 'a' && c <= 'z')
                            || (c >= 'A' && c <= 'Z')
                            || (c >= '0' && c <= '9')
                            || c == '.'
                            || c == '_'
                            || c == '@'
                            || c == ':'
                            || c == '-');
    return plain ? text : "\"" + text.replace("\\", "\\\\").replace("\"", "\\\"") + "\"";
  }
}
