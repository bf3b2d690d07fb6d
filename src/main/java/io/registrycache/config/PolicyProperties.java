package io.registrycache.config;

import java.nio.file.Path;
import java.time.Duration;
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
 * @param signatures how long signature verdicts are kept, for rules with {@code require: signed}
 */
@ConfigurationProperties("registry-cache.policy")
public record PolicyProperties(
    @DefaultValue List<Rule> rules, @DefaultValue Signatures signatures) {

  public PolicyProperties {
    rules = List.copyOf(rules);
  }

  /** No rule, default verdict times (for services built without Spring). */
  public static PolicyProperties none() {
    return new PolicyProperties(
        List.of(), new Signatures(Duration.ofMinutes(10), Duration.ofHours(24)));
  }

  /** What a rule requires of an image's signatures. */
  public enum Require {
    /** Nothing: signatures are not looked at. */
    NONE,
    /** A cosign signature by one of the rule's {@code keys} for the image's digest. */
    SIGNED
  }

  /**
   * {@code registry-cache.policy.signatures.*}: how long a signature verdict holds.
   *
   * @param verdictTtl how long the verdict on an image (per upstream, repository and manifest
   *     digest) is used without asking the upstream again; default 10m
   * @param maxStale how long past its {@code verdict-ttl} an image verified before is still served
   *     while its signatures cannot be fetched again (upstream down, failing); an image never
   *     verified is never served; default 24h; 0 serves nothing past the TTL
   */
  public record Signatures(
      @DefaultValue("10m") Duration verdictTtl, @DefaultValue("24h") Duration maxStale) {

    public Signatures {
      if (verdictTtl.isNegative() || verdictTtl.isZero()) {
        throw new IllegalArgumentException(
            "registry-cache.policy.signatures.verdict-ttl must be positive, e.g. 10m");
      }
      if (maxStale.isNegative()) {
        throw new IllegalArgumentException(
            "registry-cache.policy.signatures.max-stale must not be negative, e.g. 24h");
      }
    }
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
   *     its variants ({@code linux/arm64} allows {@code linux/arm64/v8}); lower case; empty (the
   *     default) allows every platform, for a rule that requires signatures
   * @param require {@code none} (default) or {@code signed}: an image manifest or index is served
   *     only with a cosign signature by one of {@code keys} for its digest (docs/policy.md)
   * @param keys with {@code require: signed}: PEM files of the public keys a signature may be made
   *     with (ECDSA P-256, RSA of 2048 bits or more, Ed25519); at least one; none otherwise
   */
  public record Rule(
      @DefaultValue("*") List<String> upstreams,
      @DefaultValue List<RepositoryGlob> repositories,
      @DefaultValue List<String> platforms,
      @DefaultValue("none") Require require,
      @DefaultValue List<Path> keys) {

    public Rule {
      upstreams = upstreams.stream().map(String::strip).toList();
      repositories = List.copyOf(repositories);
      platforms = normalise(platforms);
      keys = List.copyOf(keys);
      if (repositories.isEmpty()) {
        throw new IllegalArgumentException(
            "a policy rule (registry-cache.policy.rules) needs at least one repository pattern");
      }
      if (platforms.isEmpty() && require == Require.NONE) {
        throw new IllegalArgumentException(
            "a policy rule (registry-cache.policy.rules) needs platforms (e.g. linux/amd64) or"
                + " require: signed");
      }
      if (require == Require.SIGNED && keys.isEmpty()) {
        throw new IllegalArgumentException(
            "a policy rule with require: signed (registry-cache.policy.rules) needs at least one"
                + " key file in keys, e.g. cosign.pub");
      }
      if (require == Require.NONE && !keys.isEmpty()) {
        throw new IllegalArgumentException(
            "a policy rule (registry-cache.policy.rules) has keys but not require: signed, so no"
                + " signature would be checked");
      }
    }

    /** Whether this rule requires signatures. */
    public boolean signed() {
      return require == Require.SIGNED;
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
