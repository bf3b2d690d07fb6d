package io.registrycache.oci;

import org.springframework.http.HttpStatus;

/**
 * Error codes of the OCI Distribution Spec v1.1 ("Error Codes" section), with the HTTP status this
 * cache answers them with.
 */
public enum OciErrorCode {
  BLOB_UNKNOWN(HttpStatus.NOT_FOUND),
  DIGEST_INVALID(HttpStatus.BAD_REQUEST),
  MANIFEST_UNKNOWN(HttpStatus.NOT_FOUND),
  MANIFEST_INVALID(HttpStatus.BAD_REQUEST),
  NAME_INVALID(HttpStatus.BAD_REQUEST),
  NAME_UNKNOWN(HttpStatus.NOT_FOUND),
  SIZE_INVALID(HttpStatus.BAD_REQUEST),
  TAG_INVALID(HttpStatus.BAD_REQUEST),
  UNAUTHORIZED(HttpStatus.UNAUTHORIZED),
  DENIED(HttpStatus.FORBIDDEN),
  UNSUPPORTED(HttpStatus.METHOD_NOT_ALLOWED),
  TOOMANYREQUESTS(HttpStatus.TOO_MANY_REQUESTS),
  /**
   * Not in the spec's table: the upstream could not be reached or answered nonsense (502/503/504).
   */
  UPSTREAM_UNAVAILABLE(HttpStatus.BAD_GATEWAY),
  /**
   * Not in the spec's table (distribution's {@code errcode.ErrorCodeUnavailable}): the service is
   * starting or stopping and takes no pulls now; retry (503 with {@code Retry-After}).
   */
  UNAVAILABLE(HttpStatus.SERVICE_UNAVAILABLE),
  /** Not in the spec's table: an unexpected failure inside the cache. */
  UNKNOWN(HttpStatus.INTERNAL_SERVER_ERROR),
  /** Not in the spec's table: a Range the blob cannot satisfy (RFC 9110 section 15.5.17). */
  RANGE_INVALID(HttpStatus.REQUESTED_RANGE_NOT_SATISFIABLE);

  private final HttpStatus defaultStatus;

  OciErrorCode(HttpStatus defaultStatus) {
    this.defaultStatus = defaultStatus;
  }

  /** The HTTP status sent with this code unless an {@link OciException} names another. */
  public HttpStatus defaultStatus() {
    return defaultStatus;
  }
}
