package io.registrycache.cluster;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import org.springframework.stereotype.Component;

/**
 * The shared secret replicas present to each other's peer endpoint as {@code Authorization: Bearer
 * <token>} ({@code registry-cache.cluster.token} or {@code token-file}, read once at start-up).
 * Required, and at least {@value #MIN_LENGTH} characters, when a cluster is configured: the service
 * does not start without it. The token is never logged and never part of an exception message.
 *
 * <p>The comparison is constant-time in the presented value: both sides are hashed with SHA-256 and
 * the digests compared with {@link MessageDigest#isEqual}, so neither the content nor the length of
 * the expected token leaks through timing.
 */
@Component
@ConditionalOnCluster
public final class PeerToken {

  /** The shortest token accepted, in characters. */
  public static final int MIN_LENGTH = 16;

  private static final String BEARER = "Bearer ";

  private final String token;
  private final byte[] expected;

  /**
   * @throws IllegalStateException when a cluster is configured and there is no usable token (none
   *     set, both set, the file unreadable, or shorter than {@value #MIN_LENGTH} characters)
   */
  public PeerToken(ClusterProperties properties) {
    this.token = properties.enabled() ? resolve(properties) : null;
    this.expected = token == null ? null : sha256(token);
  }

  private static String resolve(ClusterProperties properties) {
    boolean inline = properties.token() != null && !properties.token().isBlank();
    boolean file = properties.tokenFile() != null;
    if (inline == file) {
      throw new IllegalStateException(
          "registry-cache.cluster: set exactly one of token and token-file (the replicas' shared secret) "
              + "when peers or peers-dns is set");
    }
    String value;
    if (inline) {
      value = properties.token().strip();
    } else {
      try {
        value = Files.readString(properties.tokenFile(), StandardCharsets.UTF_8).strip();
      } catch (IOException e) {
        throw new UncheckedIOException(
            "registry-cache.cluster.token-file " + properties.tokenFile() + " cannot be read", e);
      }
    }
    if (value.length() < MIN_LENGTH || value.chars().anyMatch(c -> c < 0x21 || c > 0x7e)) {
      throw new IllegalStateException(
          "registry-cache.cluster token must be at least "
              + MIN_LENGTH
              + " printable ASCII characters without spaces");
    }
    return value;
  }

  /** Whether a token is configured (a cluster is). */
  public boolean present() {
    return token != null;
  }

  /** The {@code Authorization} header value a replica sends to its peers. */
  public String authorization() {
    if (token == null) {
      throw new IllegalStateException("no cluster token: this replica is not in a cluster");
    }
    return BEARER + token;
  }

  /**
   * Whether an {@code Authorization} header value carries the token; false for {@code null}, other
   * schemes, and always when no token is configured.
   */
  public boolean accepts(String authorization) {
    if (expected == null
        || authorization == null
        || !authorization.regionMatches(true, 0, BEARER, 0, BEARER.length())) {
      return false;
    }
    return MessageDigest.isEqual(
        expected, sha256(authorization.substring(BEARER.length()).strip()));
  }

  private static byte[] sha256(String value) {
    try {
      return MessageDigest.getInstance("SHA-256").digest(value.getBytes(StandardCharsets.UTF_8));
    } catch (NoSuchAlgorithmException e) {
      throw new IllegalStateException("SHA-256 is required of every Java platform", e);
    }
  }

  @Override
  public String toString() {
    return token == null ? "PeerToken[none]" : "PeerToken[(set)]";
  }
}
