package io.registrycache.auth;

import java.nio.charset.StandardCharsets;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.util.Map;

/**
 * Robot (service) accounts: {@code name:token} per line, read by {@link NameValueFile}. Only each
 * token's SHA-256 is kept; a presented token is hashed and compared with {@link
 * MessageDigest#isEqual} (constant time in the hash's length, whatever the token's). Tokens must be
 * at least {@value #MIN_TOKEN_LENGTH} characters (e.g. {@code openssl rand -hex 32}).
 *
 * @param hashes SHA-256 of the token by robot name
 */
public record RobotTokens(Map<String, byte[]> hashes) {

  /** Shortest token accepted, in characters. */
  public static final int MIN_TOKEN_LENGTH = 32;

  private static final byte[] NO_TOKEN = sha256("registry-cache: no such robot");

  public RobotTokens {
    hashes = Map.copyOf(hashes);
  }

  /**
   * Parses the file's text.
   *
   * @throws IllegalArgumentException naming the line (and robot, never the token) of the first
   *     entry without a {@code :}, with an empty name, a name given twice, or a token shorter than
   *     {@value #MIN_TOKEN_LENGTH} characters
   */
  public static RobotTokens parse(String text) {
    return new RobotTokens(
        NameValueFile.parse(
            text,
            "robot",
            "name:token",
            (name, token) -> {
              if (token.length() < MIN_TOKEN_LENGTH) {
                throw new IllegalArgumentException(
                    "the token must be at least "
                        + MIN_TOKEN_LENGTH
                        + " characters (e.g. openssl rand -hex 32)");
              }
              return sha256(token);
            }));
  }

  /** Whether {@code name} is a robot of this file. */
  public boolean contains(String name) {
    return hashes.containsKey(name);
  }

  /**
   * Whether {@code token} is the token of robot {@code name}. Compares SHA-256 hashes in constant
   * time; an unknown name costs the same hash and compare.
   */
  @SuppressWarnings("ReferenceEquality") // NO_TOKEN is a sentinel: identity is the test
  public boolean verify(String name, String token) {
    byte[] expected = hashes.getOrDefault(name, NO_TOKEN);
    boolean equal = MessageDigest.isEqual(expected, sha256(token));
    return equal && expected != NO_TOKEN;
  }

  static byte[] sha256(String value) {
    try {
      return MessageDigest.getInstance("SHA-256").digest(value.getBytes(StandardCharsets.UTF_8));
    } catch (NoSuchAlgorithmException e) {
      throw new IllegalStateException(e);
    }
  }

  @Override
  public String toString() {
    return "RobotTokens" + hashes.keySet();
  }
}
