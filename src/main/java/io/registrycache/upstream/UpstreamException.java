package io.registrycache.upstream;

import io.registrycache.oci.OciErrorCode;
import io.registrycache.oci.OciException;
import java.time.Duration;
import org.springframework.http.HttpStatus;

/**
 * A failure reported by, or in reaching, an upstream registry.
 *
 * <p>{@link #isUnavailable()} tells the cache that serving stale content is the right answer (the
 * upstream is down, slow, broken or rate-limiting), as opposed to a definite "not found" or
 * "denied".
 */
public class UpstreamException extends OciException {

  private final String upstreamKey;
  private final int upstreamStatus;

  public UpstreamException(
      String upstreamKey,
      OciErrorCode code,
      HttpStatus status,
      String message,
      Duration retryAfter,
      Throwable cause) {
    this(upstreamKey, code, status, message, retryAfter, cause, 0);
  }

  /**
   * @param upstreamStatus the HTTP status the upstream answered with, or 0 when the failure is not
   *     an upstream status (transport failure, bad answer, circuit open)
   */
  UpstreamException(
      String upstreamKey,
      OciErrorCode code,
      HttpStatus status,
      String message,
      Duration retryAfter,
      Throwable cause,
      int upstreamStatus) {
    super(code, status, message, null, retryAfter, cause);
    this.upstreamKey = upstreamKey;
    this.upstreamStatus = upstreamStatus;
  }

  /** Key of the upstream that failed. */
  public String upstreamKey() {
    return upstreamKey;
  }

  /**
   * The HTTP status the upstream answered with (e.g. 503 for an upstream 503 mapped to 503, or 500
   * mapped to 502), or 0 when there was no such answer.
   */
  public int upstreamStatus() {
    return upstreamStatus;
  }

  /**
   * Whether the upstream is unreachable, failing or rate-limiting (stale content may be served).
   */
  public boolean isUnavailable() {
    return code() == OciErrorCode.UPSTREAM_UNAVAILABLE || code() == OciErrorCode.TOOMANYREQUESTS;
  }

  /** Whether the upstream definitely said the thing does not exist (404). */
  public boolean isNotFound() {
    return status() == HttpStatus.NOT_FOUND;
  }
}
