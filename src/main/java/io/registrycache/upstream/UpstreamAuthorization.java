package io.registrycache.upstream;

import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.Base64;

/**
 * An {@code Authorization} header value for one upstream and repository, and how long it may be
 * reused. {@link #toString()} never prints the secret.
 *
 * @param scheme {@code Basic} or {@code Bearer}
 * @param credentials the part after the scheme (base64 user:password, or the token)
 * @param reuseFor how long the cache keeps it: a token's {@code expires_in} minus a safety margin
 */
record UpstreamAuthorization(String scheme, String credentials, Duration reuseFor) {

  /** Basic credentials (RFC 7617) are re-read this often, so a rotated password file is seen. */
  static final Duration BASIC_REUSE = Duration.ofSeconds(60);

  static UpstreamAuthorization basic(String username, String password) {
    String pair = username + ":" + (password == null ? "" : password);
    return new UpstreamAuthorization(
        "Basic",
        Base64.getEncoder().encodeToString(pair.getBytes(StandardCharsets.UTF_8)),
        BASIC_REUSE);
  }

  /** The {@code Authorization} header value. */
  String header() {
    return scheme + " " + credentials;
  }

  @Override
  public String toString() {
    return scheme + " *** (reused for " + reuseFor + ")";
  }
}
