package io.registrycache.auth;

import java.nio.ByteBuffer;
import java.nio.charset.CharacterCodingException;
import java.nio.charset.CodingErrorAction;
import java.nio.charset.StandardCharsets;
import java.util.Base64;

/**
 * HTTP Basic credentials (RFC 7617) from an {@code Authorization} header: {@code Basic
 * base64(user-id ":" password)}, UTF-8. The scheme name is matched case-insensitively (RFC 9110
 * 11.1).
 *
 * @param user the user-id: no {@code :}, no control characters; non-empty unless the password is
 *     empty too ({@code Basic Og==}, what some clients send without credentials)
 * @param password the password, possibly empty; never printed by {@link #toString()}
 */
public record BasicCredentials(String user, String password) {

  /** Longest {@code Authorization} value looked at, in characters (8 KiB); longer ones are refused. */
  public static final int MAX_HEADER_LENGTH = 8192;

  /**
   * Parses an {@code Authorization} header value.
   *
   * @throws InvalidCredentials when the value is longer than {@link #MAX_HEADER_LENGTH}, is not of
   *     the Basic scheme, is not valid base64 (RFC 4648 section 4) or UTF-8, or has no {@code :}
   *     or an empty or control-character user-id; the message says which, never the value
   */
  public static BasicCredentials parse(String header) {
    if (header.length() > MAX_HEADER_LENGTH) {
      throw new InvalidCredentials("the Authorization header is longer than " + MAX_HEADER_LENGTH + " characters");
    }
    String value = header.strip();
    int space = value.indexOf(' ');
    if (space < 0 || !value.substring(0, space).equalsIgnoreCase("Basic")) {
      throw new InvalidCredentials("only Basic credentials are accepted (Authorization: Basic <base64 of user:password>)");
    }
    byte[] decoded;
    try {
      decoded = Base64.getDecoder().decode(value.substring(space + 1).strip());
    } catch (IllegalArgumentException e) {
      throw new InvalidCredentials("the Basic credentials are not valid base64");
    }
    String pair;
    try {
      pair = StandardCharsets.UTF_8.newDecoder()
          .onMalformedInput(CodingErrorAction.REPORT)
          .onUnmappableCharacter(CodingErrorAction.REPORT)
          .decode(ByteBuffer.wrap(decoded))
          .toString();
    } catch (CharacterCodingException e) {
      throw new InvalidCredentials("the Basic credentials are not valid UTF-8");
    }
    int colon = pair.indexOf(':');
    if (pair.equals(":")) {
      return new BasicCredentials("", ""); // no credentials at all: the caller decides
    }
    if (colon <= 0) {
      throw new InvalidCredentials("the Basic credentials must be user:password with a non-empty user");
    }
    String user = pair.substring(0, colon);
    for (int i = 0; i < user.length(); i++) {
      char c = user.charAt(i);
      if (c < 0x20 || c == 0x7f) {
        throw new InvalidCredentials("the Basic user-id holds control characters");
      }
    }
    return new BasicCredentials(user, pair.substring(colon + 1));
  }

  @Override
  public String toString() {
    return "BasicCredentials[user=" + user + ", password=***]";
  }

  /** Credentials that cannot even be read; the message is safe to show and to log. */
  public static final class InvalidCredentials extends RuntimeException {
    public InvalidCredentials(String message) {
      super(message, null, false, false);
    }
  }
}
