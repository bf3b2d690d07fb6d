package io.registrycache.auth;

/**
 * Who a pull request is from, once its credentials are checked.
 *
 * @param kind user (htpasswd), robot (tokens file) or anonymous (no credentials)
 * @param name the user or robot name; {@code anonymous} for anonymous requests
 */
public record Identity(Kind kind, String name) {

  /** The request attribute holding the identity of an authenticated request. */
  public static final String ATTRIBUTE = Identity.class.getName();

  /** A request without credentials. */
  public static final Identity ANONYMOUS = new Identity(Kind.ANONYMOUS, "anonymous");

  /** Where an identity comes from. */
  public enum Kind {
    USER,
    ROBOT,
    ANONYMOUS
  }

  public boolean anonymous() {
    return kind == Kind.ANONYMOUS;
  }

  @Override
  public String toString() {
    return kind.name().toLowerCase(java.util.Locale.ROOT) + ":" + name;
  }
}
