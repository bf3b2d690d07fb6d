package io.registrycache.config;

import java.util.List;
import java.util.regex.Pattern;
import org.springframework.util.AntPathMatcher;

/**
 * A pattern of repository names, as used by access rules ({@code
 * registry-cache.auth.rules[*].repositories}) and pull-through lists ({@code
 * registry-cache.upstreams.<key>.pull-through.allow|deny}). Matched by Spring's {@link
 * AntPathMatcher} with {@code /} as the separator, case-sensitively:
 *
 * <ul>
 *   <li>{@code *} matches any characters within one path component ({@code team/*} matches {@code
 *       team/app}, not {@code team/app/web});
 *   <li>{@code **}, a whole component, matches any number of components, none included ({@code
 *       team/**} matches {@code team}, {@code team/app} and {@code team/app/web}; {@code **}
 *       matches every name);
 *   <li>everything else matches itself.
 * </ul>
 *
 * The pattern is matched against the canonical repository name the request resolved to (OCI
 * Distribution Spec v1.1 {@code <name>} grammar: lowercase components, no {@code .} or {@code ..}
 * components, percent-escapes already decoded and the result validated), so a name cannot escape a
 * pattern with {@code ..}, {@code %2F} or upper case. Patterns are checked when the configuration
 * is bound: only lowercase letters, digits, {@code . _ - / *}; no empty, {@code .} or {@code ..}
 * components; {@code **} only as a whole component; at most 255 characters. Anything else is a
 * start-up error naming the pattern.
 *
 * @param pattern the pattern, e.g. {@code library/*} or {@code team/**}
 */
public record RepositoryGlob(String pattern) {

  private static final AntPathMatcher MATCHER = new AntPathMatcher("/");
  private static final Pattern CHARACTERS = Pattern.compile("[a-z0-9._\\-/*]+");

  /**
   * @throws IllegalArgumentException when the pattern breaks a rule above, saying which
   */
  public RepositoryGlob {
    if (pattern == null || pattern.isBlank()) {
      throw new IllegalArgumentException("a repository pattern must not be empty");
    }
    if (pattern.length() > 255) {
      throw new IllegalArgumentException(
          "repository pattern longer than 255 characters: '" + pattern.substring(0, 40) + "...'");
    }
    if (!CHARACTERS.matcher(pattern).matches()) {
      throw new IllegalArgumentException(
          "repository pattern '"
              + pattern
              + "' may only hold lowercase letters, digits, '.', '_', '-', '/' and '*' (repository names are lowercase)");
    }
    for (String component : pattern.split("/", -1)) {
      if (component.isEmpty() || component.equals(".") || component.equals("..")) {
        throw new IllegalArgumentException(
            "repository pattern '" + pattern + "' has an empty, '.' or '..' component");
      }
      if (component.contains("**") && !component.equals("**")) {
        throw new IllegalArgumentException(
            "repository pattern '"
                + pattern
                + "': '**' must be a whole component (e.g. 'team/**')");
      }
    }
  }

  /** Whether {@code repository} (a canonical, valid repository name) matches this pattern. */
  public boolean matches(String repository) {
    // the common rules without the matcher's tokenizing (checked on every request with auth on)
    if (pattern.equals("**")) {
      return true;
    }
    if (pattern.indexOf('*') < 0) {
      return pattern.equals(repository);
    }
    return MATCHER.match(pattern, repository);
  }

  /** Whether any of {@code globs} matches {@code repository}. */
  public static boolean anyMatches(List<RepositoryGlob> globs, String repository) {
    for (RepositoryGlob glob : globs) {
      if (glob.matches(repository)) {
        return true;
      }
    }
    return false;
  }

  @Override
  public String toString() {
    return pattern;
  }
}
