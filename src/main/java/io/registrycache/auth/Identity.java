package io.registrycache.auth;

import java.util.Locale;
import java.util.Set;

/**
 * Who a pull request is from, once its credentials are checked. Every identity is named with its
 * kind ({@link #subject()}), in rules, groups and logs alike, so names of different kinds never
 * match one another: {@code user:alice} (htpasswd), {@code robot:alice} (tokens file) and {@code
 * jwt:idp/alice} (subject {@code alice} of the trusted issuer keyed {@code idp}) are three
 * identities.
 *
 * @param kind user (htpasswd), robot (tokens file), issuer (a trusted external issuer's subject),
 *     anonymous (no credentials), or pass-through (credentials the cache does not know, for a
 *     pass-through upstream to judge)
 * @param name the user or robot name, or the subject of an issuer's token; {@code anonymous} for
 *     anonymous requests
 * @param pullable for a request with a bearer token of the cache's token endpoint: the repository
 *     names (as the client named them in the token request's scopes) the token grants {@code pull}
 *     of; {@code null} otherwise (then only the rules limit)
 * @param groups for an issuer's subject: the groups its groups claim lists; empty otherwise
 * @param issuer for an issuer's subject: the issuer's key ({@code
 *     registry-cache.auth.trusted-issuers[].key}); {@code null} otherwise
 */
public record Identity(
    Kind kind, String name, Set<String> pullable, Set<String> groups, String issuer) {

  /** An identity proven by Basic credentials (or none): limited by the rules only. */
  public Identity(Kind kind, String name) {
    this(kind, name, null);
  }

  /** An identity of the cache's own credentials or tokens. */
  public Identity(Kind kind, String name, Set<String> pullable) {
    this(kind, name, pullable, null, null);
  }

  public Identity {
    pullable = pullable == null ? null : Set.copyOf(pullable);
    groups = groups == null ? Set.of() : Set.copyOf(groups);
    if (kind == Kind.ISSUER && issuer == null) {
      throw new IllegalArgumentException("an issuer's subject needs the issuer's key");
    }
  }

  /**
   * Subject {@code name} of the trusted issuer keyed {@code issuerKey}, in the {@code groups} of
   * its token.
   */
  public static Identity external(String issuerKey, String name, Set<String> groups) {
    return new Identity(Kind.ISSUER, name, null, groups, issuerKey);
  }

  /** The request attribute holding the identity of an authenticated request. */
  public static final String ATTRIBUTE = Identity.class.getName();

  /** A request without credentials. */
  public static final Identity ANONYMOUS = new Identity(Kind.ANONYMOUS, "anonymous");

  /** Where an identity comes from. */
  public enum Kind {
    USER,
    ROBOT,
    /**
     * The subject of a bearer token of a trusted external issuer ({@code
     * registry-cache.auth.trusted-issuers}).
     */
    ISSUER,
    ANONYMOUS,
    /**
     * Basic credentials neither the htpasswd nor the tokens file knows, accepted because an
     * upstream takes each client's own credentials ({@code credentials: passthrough}): they may
     * pull from such upstreams only, where the upstream decides (it confirms each repository); no
     * access rule names them. The name is the user name the client gave.
     */
    PASSTHROUGH
  }

  public boolean anonymous() {
    return kind == Kind.ANONYMOUS;
  }

  /**
   * The identity as rules and groups name it: {@code user:<name>}, {@code robot:<name>}, {@code
   * jwt:<issuer-key>/<subject>}, {@code passthrough:<name>} or {@code anonymous}.
   */
  public String subject() {
    return switch (kind) {
      case ISSUER -> "jwt:" + issuer + "/" + name;
      case ANONYMOUS -> "anonymous";
      default -> kind.name().toLowerCase(Locale.ROOT) + ":" + name;
    };
  }

  /**
   * The identity as a metric label value, of bounded cardinality: {@code robot:<name>} for a robot
   * (the operator's tokens file bounds them), {@code user} for every user (one series per person
   * would grow without bound), {@code jwt:<issuer-key>} for every subject of an issuer, {@code
   * passthrough} for every pass-through identity (any name a client gives), {@code anonymous}.
   * Never a secret.
   */
  public String metricLabel() {
    return switch (kind) {
      case ROBOT -> "robot:" + name;
      case USER -> "user";
      case ISSUER -> "jwt:" + issuer;
      case PASSTHROUGH -> "passthrough";
      case ANONYMOUS -> "anonymous";
    };
  }

  /**
   * The identity as the access log names it: {@link #subject()}. Never a secret (a token's subject,
   * not the token).
   */
  public String logName() {
    return subject();
  }

  @Override
  public String toString() {
    return subject();
  }
}
