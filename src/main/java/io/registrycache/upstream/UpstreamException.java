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

  public UpstreamException(
      String upstreamKey,
      OciErrorCode code,
      HttpStatus status,
      String message,
      Duration retryAfter,
      Throwable cause) {
    super(code, status, message, null, retryAfter, cause);
    this.upstreamKey = upstreamKey;
  }

  /** Key of the upstream that failed. */
  public String upstreamKey() {
    return upstreamKey;
  }

  /** Whether the upstream is unreachable, failing or rate-limiting (stale content may be served). */
  public boolean isUnavailable() {
    return code() == OciErrorCode.UPSTREAM_UNAVAILABLE || code() == OciErrorCode.TOOMANYREQUESTS;
  }

  /** Whether the upstream definitely said the thing does not exist (404). */
  public boolean isNotFound() {
    return status() == HttpStatus.NOT_FOUND;
  }
}
