package io.registrycache.oci;

import java.time.Duration;
import java.util.Optional;
import org.springframework.http.HttpStatus;

/**
 * A failure that reaches the client as an OCI error body {@code {"errors":[{code,message,detail}]}}
 * (OCI Distribution Spec v1.1, "Error Codes"). Thrown anywhere on the pull path; the HTTP API maps
 * it to its status and body.
 */
public class OciException extends RuntimeException {

  private final OciErrorCode code;
  private final HttpStatus status;
  private final transient Object detail;
  private final Duration retryAfter;

  public OciException(OciErrorCode code, String message) {
    this(code, code.defaultStatus(), message, null, null, null);
  }

  public OciException(OciErrorCode code, HttpStatus status, String message) {
    this(code, status, message, null, null, null);
  }

  public OciException(
      OciErrorCode code,
      HttpStatus status,
      String message,
      Object detail,
      Duration retryAfter,
      Throwable cause) {
    super(message, cause);
    this.code = code;
    this.status = status;
    this.detail = detail;
    this.retryAfter = retryAfter;
  }

  public OciErrorCode code() {
    return code;
  }

  public HttpStatus status() {
    return status;
  }

  /** Optional structured detail for the error body; may be {@code null}. */
  public Object detail() {
    return detail;
  }

  /** For {@code TOOMANYREQUESTS}: the upstream's {@code Retry-After}, if it sent one. */
  public Optional<Duration> retryAfter() {
    return Optional.ofNullable(retryAfter);
  }

  public static OciException nameInvalid(String name, String why) {
    return new OciException(
        OciErrorCode.NAME_INVALID, "invalid repository name '" + abbreviate(name) + "': " + why);
  }

  public static OciException digestInvalid(String digest, String why) {
    return new OciException(
        OciErrorCode.DIGEST_INVALID, "invalid digest '" + abbreviate(digest) + "': " + why);
  }

  public static OciException manifestUnknown(String what) {
    return new OciException(OciErrorCode.MANIFEST_UNKNOWN, "manifest unknown: " + what);
  }

  public static OciException blobUnknown(String what) {
    return new OciException(OciErrorCode.BLOB_UNKNOWN, "blob unknown: " + what);
  }

  static String abbreviate(String s) {
    if (s == null) {
      return "";
    }
    return s.length() <= 300 ? s : s.substring(0, 300) + "...";
  }
}
