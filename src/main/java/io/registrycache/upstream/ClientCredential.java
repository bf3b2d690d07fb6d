package io.registrycache.upstream;

import java.nio.charset.StandardCharsets;
import java.security.GeneralSecurityException;
import java.security.MessageDigest;
import java.security.SecureRandom;
import java.util.HexFormat;
import javax.crypto.Mac;
import javax.crypto.spec.SecretKeySpec;

/**
 * A client's own credentials for a pass-through upstream ({@code
 * registry-cache.upstreams.<key>.credentials: passthrough}), as it gave them to the cache: HTTP
 * Basic on the request, or the user name and password it gave the token endpoint. Held in memory
 * only, by the request that carries them (and what it starts: a fill, its retries); never logged
 * ({@link #toString()} prints the user name only) and never written anywhere.
 *
 * <p>{@link #id()} names the credentials where they must be told apart without being kept: an
 * HMAC-SHA256 (hex, 64 characters) of user name and password under a key made at start-up, so it is
 * worthless outside this process and says nothing of the password. Upstream tokens got with these
 * credentials, and the upstream's confirmations of their access, are remembered under it.
 *
 * @param user the user name, possibly empty for {@link #ANONYMOUS}
 * @param password the password or token, possibly empty
 */
public record ClientCredential(String user, String password) {

  /** A client that gave no credentials: the upstream is asked anonymously. */
  public static final ClientCredential ANONYMOUS = new ClientCredential("", "");

  /**
   * One keyed HMAC per thread (a provider lookup and key set-up per request cost more than the
   * HMAC).
   */
  private static final ThreadLocal<Mac> MACS;

  static {
    byte[] bytes = new byte[32];
    new SecureRandom().nextBytes(bytes);
    SecretKeySpec key = new SecretKeySpec(bytes, "HmacSHA256");
    MACS =
        ThreadLocal.withInitial(
            () -> {
              try {
                Mac mac = Mac.getInstance("HmacSHA256");
                mac.init(key);
                return mac;
              } catch (GeneralSecurityException e) {
                throw new IllegalStateException(e);
              }
            });
  }

  public ClientCredential {
    user = user == null ? "" : user;
    password = password == null ? "" : password;
  }

  /** Whether the client gave no credentials. */
  public boolean anonymous() {
    return user.isEmpty() && password.isEmpty();
  }

  /** The HMAC of user name and password under this process's key (hex), or {@code anonymous}. */
  public String id() {
    if (anonymous()) {
      return "anonymous";
    }
    Mac mac = MACS.get(); // doFinal resets it for the next use
    mac.update(user.getBytes(StandardCharsets.UTF_8));
    mac.update((byte) 0);
    return HexFormat.of().formatHex(mac.doFinal(password.getBytes(StandardCharsets.UTF_8)));
  }

  @Override
  public boolean equals(Object other) {
    return other instanceof ClientCredential c
        && MessageDigest.isEqual(
            user.getBytes(StandardCharsets.UTF_8), c.user.getBytes(StandardCharsets.UTF_8))
        && MessageDigest.isEqual(
            password.getBytes(StandardCharsets.UTF_8), c.password.getBytes(StandardCharsets.UTF_8));
  }

  @Override
  public int hashCode() {
    return user.hashCode();
  }

  @Override
  public String toString() {
    return anonymous()
        ? "ClientCredential[anonymous]"
        : "ClientCredential[user=" + user + ", password=***]";
  }
}
