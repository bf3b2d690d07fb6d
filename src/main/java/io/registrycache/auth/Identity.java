package io.registrycache.auth;

/**
 * Who a pull request is from, once its credentials are checked.
 *
 * @param kind user (htpasswd), robot (tokens file), anonymous (no credentials), or pass-through
 *     (credentials the cache does not know, for a pass-through upstream to judge)
 * @param name the user or robot name; {@code anonymous} for anonymous requests
 * @param pullable for a request with a bearer token: the repository names (as the client named
 *     them in the token request's scopes) the token grants {@code pull} of; {@code null} for Basic
 *     credentials and anonymous requests (then only the rules limit)
 * @param groups for a user of a trusted external issuer's token: the groups its groups claim
 *     lists ({@code group:<group>} in the rules, besides {@code registry-cache.auth.groups}); empty
 *     otherwise
 * @param issuer for a user of a trusted external issuer's token ({@code
 *     registry-cache.auth.trusted-issuers}): that issuer's {@code iss}; {@code null} otherwise
 */
public record Identity(
    Kind kind, String name, java.util.Set<String> pullable, java.util.Set<String> groups, String issuer) {

  /** An identity proven by Basic credentials (or none): limited by the rules only. */
  public Identity(Kind kind, String name) {
    this(kind, name, null);
  }

  /** An identity of the cache's own credentials or tokens. */
  public Identity(Kind kind, String name, java.util.Set<String> pullable) {
    this(kind, name, pullable, null, null);
  }

  public Identity {
    pullable = pullable == null ? null : java.util.Set.copyOf(pullable);
    groups = groups == null ? java.util.Set.of() : java.util.Set.copyOf(groups);
  }

  /** A user proven by a bearer token of the trusted external issuer {@code issuer}. */
  public static Identity external(String issuer, String name, java.util.Set<String> groups) {
    return new Identity(Kind.USER, name, null, groups, issuer);
  }

  /** The request attribute holding the identity of an authenticated request. */
  public static final String ATTRIBUTE = Identity.class.getName();

  /** A request without credentials. */
  public static final Identity ANONYMOUS = new Identity(Kind.ANONYMOUS, "anonymous");

  /** Where an identity comes from. */
  public enum Kind {
    USER,
    ROBOT,
    ANONYMOUS,
    /**
     * Basic credentials neither the htpasswd nor the tokens file knows, accepted because an
     * upstream takes each client's own credentials ({@code credentials: passthrough}): they may
     * pull from such upstreams only, where the upstream decides (it confirms each repository);
     * no access rule names them. The name is the user name the client gave.
     */
    PASSTHROUGH
  }

  public boolean anonymous() {
    return kind == Kind.ANONYMOUS;
  }

  /**
   * The identity as a metric label value, of bounded cardinality: {@code robot:<name>} for a
   * robot (the operator's tokens file bounds them), {@code user} for every user (one series per
   * person would grow without bound), {@code passthrough} for every pass-through identity (any
   * name a client gives), {@code anonymous}. Never a secret.
   */
  public String metricLabel() {
    return switch (kind) {
      case ROBOT -> "robot:" + name;
      case USER -> "user";
      case PASSTHROUGH -> "passthrough";
      case ANONYMOUS -> "anonymous";
    };
  }

  /**
   * The identity as the access log names it: {@code user:<name>}, {@code robot:<name>}, {@code
   * passthrough:<name>} (the user name a client gave for a pass-through upstream) or {@code
   * anonymous}. Never a secret (a bearer token's subject, not the token).
   */
  public String logName() {
    return kind == Kind.ANONYMOUS ? "anonymous" : toString();
  }

  @Override
  public String toString() {
    return kind.name().toLowerCase(java.util.Locale.ROOT) + ":" + name;
  }
}
