package io.registrycache.auth;

import io.registrycache.oci.OciErrorCode;
import io.registrycache.oci.OciException;
import org.springframework.http.HttpStatus;

/**
 * 401 {@code UNAUTHORIZED} (OCI Distribution Spec v1.1, "Error Codes") raised by the cache's own
 * authentication, with the {@code WWW-Authenticate} challenge the response must carry (RFC 9110
 * 11.6.1; RFC 7617 for Basic), e.g. {@code Basic realm="registry-cache", charset="UTF-8"}.
 */
public class AuthenticationRequired extends OciException {

  private final String challenge;

  public AuthenticationRequired(String challenge, String message) {
    super(OciErrorCode.UNAUTHORIZED, HttpStatus.UNAUTHORIZED, message);
    this.challenge = challenge;
  }

  /** The value of the response's {@code WWW-Authenticate} header. */
  public String challenge() {
    return challenge;
  }
}
