package io.registrycache.config;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Locale;
import org.springframework.boot.context.properties.ConfigurationProperties;
import org.springframework.boot.context.properties.bind.DefaultValue;

/**
 * {@code registry-cache.policy.*}: what the cache serves at all, per upstream and repository
 * (docs/policy.md). Off by default: with no rule, every manifest is served as without a policy, and
 * a request costs one check of an empty list.
 *
 * @param rules the policy rules, in order; for each request the first rule that matches its
 *     upstream and repository applies, the others not; default none
 */
@ConfigurationProperties("registry-cache.policy")
public record PolicyProperties(@DefaultValue List<Rule> rules) {

  public PolicyProperties {
    rules = List.copyOf(rules);
  }

  /**
   * One policy rule.
   *
   * @param upstreams upstream keys ({@code registry-cache.upstreams.<key>}; with {@code
   *     allow-any-upstream} an unconfigured upstream's key is its host) or {@code *}; default
   *     {@code *}
   * @param repositories repository patterns ({@link RepositoryGlob}: {@code *} within a component,
   *     {@code **} across), matched against the canonical name at the upstream; at least one
   * @param platforms the platforms whose images may be pulled, {@code os/architecture[/variant]}
   *     (e.g. {@code linux/amd64}, {@code linux/arm/v7}); a platform without variant allows each of
   *     its variants ({@code linux/arm64} allows {@code linux/arm64/v8}); lower case; at least one
   */
  public record Rule(
      @DefaultValue("*") List<String> upstreams,
      @DefaultValue List<RepositoryGlob> repositories,
      @DefaultValue List<String> platforms) {

    public Rule {
      upstreams = upstreams.stream().map(String::strip).toList();
      repositories = List.copyOf(repositories);
      platforms = normalise(platforms);
      if (repositories.isEmpty()) {
        throw new IllegalArgumentException(
            "a policy rule (registry-cache.policy.rules) needs at least one repository pattern");
      }
      if (platforms.isEmpty()) {
        throw new IllegalArgumentException(
            "a policy rule (registry-cache.policy.rules) needs at least one platform, e.g. linux/amd64");
      }
    }

    /** Whether this rule is for {@code repository} of the upstream keyed {@code upstream}. */
    public boolean matches(String upstream, String repository) {
      return (upstreams.contains("*") || upstreams.contains(upstream))
          && RepositoryGlob.anyMatches(repositories, repository);
    }

    /**
     * Whether {@code platform} ({@code os/architecture[/variant]}, any case) is one this rule
     * allows: equal to an allowed platform, or a variant of an allowed platform without variant.
     */
    public boolean allows(String platform) {
      String p = platform.toLowerCase(Locale.ROOT);
      for (String allowed : platforms) {
        if (p.equals(allowed)
            || (allowed.indexOf('/') == allowed.lastIndexOf('/') && p.startsWith(allowed + "/"))) {
          return true;
        }
      }
      return false;
    }

    private static List<String> normalise(List<String> platforms) {
      List<String> out = new ArrayList<>();
      for (String p : platforms) {
        String s = p == null ? "" : p.strip().toLowerCase(Locale.ROOT);
        String[] parts = s.split("/", -1);
        if (parts.length < 2
            || parts.length > 3
            || Arrays.stream(parts).anyMatch(c -> c.isEmpty() || !c.matches("[a-z0-9._-]+"))) {
          throw new IllegalArgumentException(
              "policy platform '"
                  + p
                  + "' is not os/architecture[/variant], e.g. linux/amd64 or linux/arm/v7");
        }
        if (!out.contains(s)) {
          out.add(s);
        }
      }
      return List.copyOf(out);
    }
  }
}
