package io.registrycache.auth;

import java.nio.ByteBuffer;
import java.nio.charset.CharacterCodingException;
import java.nio.charset.CodingErrorAction;
import java.nio.charset.StandardCharsets;
import java.util.Base64;
import java.util.List;

/**
 * What a request's {@code Authorization} header carries: nothing, HTTP Basic credentials (RFC 7617)
 * or a bearer token (RFC 6750 section 2.1). {@link #parse} is the one reader of that header on the
 * pull port.
 */
public sealed interface Credentials permits Credentials.None, BasicCredentials, Credentials.Bearer {

  /**
   * Longest {@code Authorization} value looked at, in characters (8 KiB); longer ones are refused.
   */
  int MAX_HEADER_LENGTH = 8192;

  /**
   * No credentials: no header, or {@code Basic Og==} (base64 of {@code ":"}, what containers/image
   * sends).
   */
  None NONE = new None();

  /** No credentials. */
  record None() implements Credentials {}

  /**
   * A bearer token (RFC 6750 section 2.1: {@code b64token}, i.e. RFC 9110's {@code token68}).
   *
   * @param token the token; never printed by {@link #toString()}
   */
  record Bearer(String token) implements Credentials {
    @Override
    public String toString() {
      return "Bearer[***]";
    }
  }

  /**
   * Reads the {@code Authorization} header. The scheme is matched case-insensitively (RFC 9110
   * section 11.1); one or more spaces separate it from its value.
   *
   * @param values the header's values, empty (or {@code null}) when it was not sent
   * @return {@link #NONE} without a header or with empty Basic credentials; the {@link
   *     BasicCredentials} (user-id without {@code :} or control characters, non-empty) or the
   *     {@link Bearer} token
   * @throws Invalid for more than one header, one longer than {@link #MAX_HEADER_LENGTH}, another
   *     scheme, Basic credentials that are not base64 (RFC 4648 section 4) of UTF-8 {@code
   *     user-id:password}, or a bearer token that is not a {@code b64token}; the message says which
   *     and never quotes the value
   */
  static Credentials parse(List<String> values) {
    if (values == null || values.isEmpty()) {
      return NONE;
    }
    if (values.size() > 1) {
      throw new Invalid("more than one Authorization header");
    }
    String header = values.get(0);
    if (header.length() > MAX_HEADER_LENGTH) {
      throw new Invalid(
          "the Authorization header is longer than " + MAX_HEADER_LENGTH + " characters");
    }
    String value = header.strip();
    int space = value.indexOf(' ');
    String scheme = space < 0 ? value : value.substring(0, space);
    String rest = space < 0 ? "" : value.substring(space + 1).strip();
    if (scheme.equalsIgnoreCase("Basic")) {
      return basic(rest);
    }
    if (scheme.equalsIgnoreCase("Bearer")) {
      if (!isToken68(rest)) {
        throw new Invalid("the bearer token is malformed (RFC 6750 section 2.1)");
      }
      return new Bearer(rest);
    }
    throw new Invalid("unsupported authorization scheme: Basic or Bearer credentials are accepted");
  }

  private static Credentials basic(String encoded) {
    byte[] decoded;
    try {
      decoded = Base64.getDecoder().decode(encoded);
    } catch (IllegalArgumentException e) {
      throw new Invalid("the Basic credentials are not valid base64");
    }
    String pair;
    try {
      pair =
          StandardCharsets.UTF_8
              .newDecoder()
              .onMalformedInput(CodingErrorAction.REPORT)
              .onUnmappableCharacter(CodingErrorAction.REPORT)
              .decode(ByteBuffer.wrap(decoded))
              .toString();
    } catch (CharacterCodingException e) {
      throw new Invalid("the Basic credentials are not valid UTF-8");
    }
    if (pair.equals(":")) {
      return NONE; // "Basic Og==": no credentials at all
    }
    int colon = pair.indexOf(':');
    if (colon <= 0) {
      throw new Invalid("the Basic credentials must be user:password with a non-empty user");
    }
    String user = pair.substring(0, colon);
    for (int i = 0; i < user.length(); i++) {
      char c = user.charAt(i);
      if (c < 0x20 || c == 0x7f) {
        throw new Invalid("the Basic user-id holds control characters");
      }
    }
    return new BasicCredentials(user, pair.substring(colon + 1));
  }

  /**
   * RFC 9110 section 11.2 {@code token68}: {@code 1*( ALPHA / DIGIT / "-" / "." / "_" / "~" / "+" /
   * "/" ) *"="}.
   */
  private static boolean isToken68(String value) {
    int n = value.length();
    int i = 0;
    while (i < n) {
      char c = value.charAt(i);
      if ((c >= 'a' && c <= 'z')
          || (c >= 'A' && c <= 'Z')
          || (c >= '0' && c <= '9')
          || "-._~+/".indexOf(c) >= 0) {
        i++;
      } else {
        break;
      }
    }
    if (i == 0) {
      return false;
    }
    while (i < n && value.charAt(i) == '=') {
      i++;
    }
    return i == n;
  }

  /**
   * An {@code Authorization} header that cannot be read; the message is safe to show and to log.
   */
  final class Invalid extends RuntimeException {
    public Invalid(String message) {
      super(message, null, false, false);
    }
  }
}
