package io.registrycache.auth;

/**
 * HTTP Basic credentials (RFC 7617), as {@link Credentials#parse} reads them from an {@code
 * Authorization} header, or as the token endpoint's password grant gives them.
 *
 * @param user the user-id: no {@code :}, no control characters, non-empty
 * @param password the password, possibly empty; never printed by {@link #toString()}
 */
public record BasicCredentials(String user, String password) implements Credentials {

  @Override
  public String toString() {
    return "BasicCredentials[user=" + user + ", password=***]";
  }
}
