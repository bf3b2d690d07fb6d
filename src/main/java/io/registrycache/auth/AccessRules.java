package io.registrycache.auth;

import io.registrycache.config.AuthProperties;
import io.registrycache.config.RepositoryGlob;
import java.util.List;
import java.util.Map;

/**
 * What each identity may pull: allow rules only, nothing allowed that no rule allows ({@code
 * registry-cache.auth.rules}, {@code registry-cache.auth.groups}). A rule applies to an identity
 * when one of its subjects names it: {@code user:<name>} or {@code robot:<name>} by kind and name,
 * {@code group:<group>} when the group lists the name (users and robots alike) or the identity's
 * own groups (a trusted external issuer's groups claim) name the group, {@code
 * authenticated} for every user and robot, {@code anonymous} for requests without credentials,
 * {@code *} for all (the only subject that names a {@link Identity.Kind#PASSTHROUGH} identity). It allows an upstream key named in its {@code upstreams} (or {@code *}) and a
 * canonical repository name one of its {@link RepositoryGlob}s matches.
 */
public final class AccessRules {

  private final List<AuthProperties.Rule> rules;
  private final Map<String, List<String>> groups;

  public AccessRules(List<AuthProperties.Rule> rules, Map<String, List<String>> groups) {
    this.rules = List.copyOf(rules);
    this.groups = Map.copyOf(groups);
  }

  /** Whether {@code identity} may pull {@code repository} (canonical) of the upstream {@code upstreamKey}. */
  public boolean allows(Identity identity, String upstreamKey, String repository) {
    for (AuthProperties.Rule rule : rules) {
      if (appliesTo(rule, identity)
          && (rule.upstreams().contains("*") || rule.upstreams().contains(upstreamKey))
          && RepositoryGlob.anyMatches(rule.repositories(), repository)) {
        return true;
      }
    }
    return false;
  }

  private boolean appliesTo(AuthProperties.Rule rule, Identity identity) {
    for (String subject : rule.subjects()) {
      if (subject.equals("*")) {
        return true;
      }
      if (identity.kind() == Identity.Kind.PASSTHROUGH) {
        continue; // known to an upstream only: no rule but '*' can name it
      }
      if (identity.anonymous()) {
        if (subject.equals("anonymous")) {
          return true;
        }
        continue;
      }
      if (subject.equals("authenticated")
          || subject.equals((identity.kind() == Identity.Kind.USER ? "user:" : "robot:") + identity.name())) {
        return true;
      }
      if (subject.startsWith("group:")
          && (groups.getOrDefault(subject.substring("group:".length()), List.of()).contains(identity.name())
              || identity.groups().contains(subject.substring("group:".length())))) {
        return true;
      }
    }
    return false;
  }
}
