package io.registrycache.oci;

import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.util.HexFormat;

/**
 * A content digest {@code algorithm:encoded} (OCI Image Spec, "Digests"). Only the registered
 * algorithms are accepted: {@code sha256} (64 lowercase hex characters) and {@code sha512} (128);
 * every instance is valid (checked on construction).
 *
 * @param algorithm {@code sha256} or {@code sha512}
 * @param hex the encoded part, lowercase hex
 */
public record Digest(String algorithm, String hex) {

  /**
   * Validates the parts.
   *
   * @throws OciException {@code DIGEST_INVALID} (400) for an unknown algorithm, a wrong length or
   *     characters other than lowercase hex
   */
  public Digest {
    String value = algorithm + ":" + hex;
    if (algorithm == null || hex == null) {
      throw OciException.digestInvalid(value, "expected algorithm:hex");
    }
    int expectedLength =
        switch (algorithm) {
          case "sha256" -> 64;
          case "sha512" -> 128;
          default -> throw OciException.digestInvalid(value, "unsupported algorithm " + algorithm);
        };
    if (hex.length() != expectedLength) {
      throw OciException.digestInvalid(
          value, algorithm + " needs " + expectedLength + " hex characters, got " + hex.length());
    }
    if (!Grammar.lowerHex(hex)) {
      throw OciException.digestInvalid(value, "encoded part must be lowercase hex");
    }
  }

  /**
   * Parses a digest string.
   *
   * @throws OciException {@code DIGEST_INVALID} (400) for a malformed string, an unknown algorithm,
   *     a wrong length or non-hex characters
   */
  public static Digest parse(String value) {
    if (value == null || !Grammar.digest(value)) {
      throw OciException.digestInvalid(value, "expected algorithm:hex");
    }
    int colon = value.indexOf(':');
    return new Digest(value.substring(0, colon), value.substring(colon + 1));
  }

  /** Whether {@code value} looks like a digest (contains ':'), as opposed to a tag. */
  public static boolean looksLikeDigest(String value) {
    return value.indexOf(':') >= 0;
  }

  /** The sha256 digest of {@code bytes}. */
  public static Digest sha256(byte[] bytes) {
    return new Digest("sha256", HexFormat.of().formatHex(newSha256().digest(bytes)));
  }

  /** Computes the digest of {@code bytes} with this digest's algorithm. */
  public Digest recompute(byte[] bytes) {
    return new Digest(algorithm, HexFormat.of().formatHex(newMessageDigest().digest(bytes)));
  }

  /** A fresh {@link MessageDigest} for this digest's algorithm. */
  public MessageDigest newMessageDigest() {
    try {
      return MessageDigest.getInstance("sha256".equals(algorithm) ? "SHA-256" : "SHA-512");
    } catch (NoSuchAlgorithmException e) {
      throw new IllegalStateException(e);
    }
  }

  /** Whether {@code md}'s result (consumed by this call) equals this digest. */
  public boolean matches(MessageDigest md) {
    return hex.equals(HexFormat.of().formatHex(md.digest()));
  }

  private static MessageDigest newSha256() {
    try {
      return MessageDigest.getInstance("SHA-256");
    } catch (NoSuchAlgorithmException e) {
      throw new IllegalStateException(e);
    }
  }

  @Override
  public String toString() {
    return algorithm + ":" + hex;
  }
}
