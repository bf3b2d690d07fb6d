package io.registrycache.upstream;

import java.util.LinkedHashMap;
import java.util.Locale;
import java.util.Map;
import java.util.Optional;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * One {@code WWW-Authenticate} challenge (RFC 9110 section 11.6.1): its scheme and auth-params,
 * e.g. {@code Bearer realm="https://auth.example/token",service="registry"}.
 *
 * @param scheme the auth-scheme, lower case ({@code basic}, {@code bearer})
 * @param params auth-param names (lower case) to their unquoted values
 */
record AuthChallenge(String scheme, Map<String, String> params) {

  private static final Pattern PARAM =
      Pattern.compile(
          "([A-Za-z0-9_!#$%&'*+.^`|~-]+)\\s*=\\s*(?:\"((?:[^\"\\\\]|\\\\.)*)\"|([^\\s,]*))");

  static AuthChallenge parse(String header) {
    String trimmed = header == null ? "" : header.trim();
    int space = trimmed.indexOf(' ');
    String scheme = (space < 0 ? trimmed : trimmed.substring(0, space)).toLowerCase(Locale.ROOT);
    Map<String, String> params = new LinkedHashMap<>();
    if (space > 0) {
      Matcher m = PARAM.matcher(trimmed.substring(space + 1));
      while (m.find()) {
        String value = m.group(2) != null ? m.group(2).replaceAll("\\\\(.)", "$1") : m.group(3);
        params.putIfAbsent(m.group(1).toLowerCase(Locale.ROOT), value);
      }
    }
    return new AuthChallenge(scheme, Map.copyOf(params));
  }

  boolean isBasic() {
    return "basic".equals(scheme);
  }

  boolean isBearer() {
    return "bearer".equals(scheme);
  }

  Optional<String> realm() {
    return Optional.ofNullable(params.get("realm")).filter(r -> !r.isBlank());
  }

  Optional<String> service() {
    return Optional.ofNullable(params.get("service")).filter(s -> !s.isBlank());
  }
}
