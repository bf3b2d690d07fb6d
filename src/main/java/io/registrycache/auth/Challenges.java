package io.registrycache.auth;

/**
 * The one builder of {@code WWW-Authenticate} values (RFC 9110 section 11.6.1) of the cache's
 * ports: auth-params as quoted strings, {@code "} and {@code \} escaped (RFC 9110 section 5.6.4),
 * control characters left out, so a value taken from a request cannot break the header.
 */
public final class Challenges {

  private Challenges() {}

  /** {@code Basic realm="<realm>", charset="UTF-8"} (RFC 7617 sections 2 and 2.1). */
  public static String basic(String realm) {
    return "Basic realm=" + quoted(realm) + ", charset=\"UTF-8\"";
  }

  /** {@code Bearer realm="<realm>"} (RFC 6750 section 3). */
  public static String bearer(String realm) {
    return "Bearer realm=" + quoted(realm);
  }

  /**
   * {@code Bearer realm="<realm>",service="<service>"[,scope="<scope>"]}, as distribution's token
   * specification ("Token Authentication Specification") writes it.
   *
   * @param scope e.g. {@code repository:team/app:pull}, or {@code null}
   */
  public static String bearer(String realm, String service, String scope) {
    return "Bearer realm="
        + quoted(realm)
        + ",service="
        + quoted(service)
        + (scope == null ? "" : ",scope=" + quoted(scope));
  }

  /**
   * {@code repository:<name>:pull}: the scope of pulling {@code repository} (distribution's "Token
   * Scope Documentation").
   */
  public static String pullScope(String repository) {
    return "repository:" + repository + ":pull";
  }

  static String quoted(String value) {
    StringBuilder out = new StringBuilder(value.length() + 2).append('"');
    for (int i = 0; i < value.length(); i++) {
      char c = value.charAt(i);
      if ((c < 0x20 && c != '\t') || c == 0x7f) {
        continue;
      }
      if (c == '"' || c == '\\') {
        out.append('\\');
      }
      out.append(c);
    }
    return out.append('"').toString();
  }
}
