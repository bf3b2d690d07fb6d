package io.registrycache.auth;

import java.util.Map;
import java.util.regex.Pattern;

/**
 * The users of an Apache htpasswd file, bcrypt entries only: {@code name:$2y$<cost>$<53 chars>} per
 * line, as {@code htpasswd -B} writes them ({@code $2a$}, {@code $2b$} and {@code $2y$} are
 * accepted; Apache's htpasswd documentation, "bcrypt"), read by {@link NameValueFile}. MD5 ({@code
 * $apr1$}), SHA-1 ({@code {SHA}}), crypt and plain-text entries are refused: they are fast to
 * guess.
 *
 * @param hashes bcrypt hash by user name
 */
public record Htpasswd(Map<String, String> hashes) {

  /**
   * bcrypt's cost when the file has no entry: Spring Security's {@code BCryptPasswordEncoder}
   * default.
   */
  static final int DEFAULT_COST = 10;

  private static final Pattern BCRYPT =
      Pattern.compile("\\$2[aby]\\$(0[4-9]|[12][0-9]|3[01])\\$[./A-Za-z0-9]{53}");

  public Htpasswd {
    hashes = Map.copyOf(hashes);
  }

  /**
   * Parses the file's text.
   *
   * @throws IllegalArgumentException naming the line (and user, never the hash) of the first entry
   *     without a {@code :}, with an empty name, a name given twice, or a hash that is not bcrypt
   */
  public static Htpasswd parse(String text) {
    return new Htpasswd(
        NameValueFile.parse(
            text,
            "user",
            "name:<bcrypt hash>",
            (name, hash) -> {
              if (!BCRYPT.matcher(hash).matches()) {
                throw new IllegalArgumentException(
                    "only bcrypt hashes are accepted (create them with 'htpasswd -B'); found "
                        + scheme(hash));
              }
              return hash;
            }));
  }

  /** The cost (log2 rounds) of a bcrypt hash of this file: the two digits after {@code $2?$}. */
  static int cost(String hash) {
    return (hash.charAt(4) - '0') * 10 + (hash.charAt(5) - '0');
  }

  /** The highest cost of the file's hashes; {@link #DEFAULT_COST} without entries. */
  public int highestCost() {
    return hashes.values().stream().mapToInt(Htpasswd::cost).max().orElse(DEFAULT_COST);
  }

  private static String scheme(String hash) {
    if (hash.startsWith("$apr1$")) {
      return "an MD5 ($apr1$) hash";
    }
    if (hash.startsWith("{SHA}")) {
      return "a SHA-1 ({SHA}) hash";
    }
    if (hash.startsWith("$2")) {
      return "a malformed bcrypt hash";
    }
    if (hash.startsWith("$")) {
      return "a crypt(3) hash of another scheme";
    }
    return "a crypt(3) or plain-text value";
  }

  @Override
  public String toString() {
    return "Htpasswd" + hashes.keySet();
  }
}
