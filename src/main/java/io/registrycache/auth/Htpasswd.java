package io.registrycache.auth;

import java.util.LinkedHashMap;
import java.util.Map;
import java.util.regex.Pattern;

/**
 * The users of an Apache htpasswd file, bcrypt entries only: {@code name:$2y$<cost>$<53 chars>}
 * per line, as {@code htpasswd -B} writes them ({@code $2a$}, {@code $2b$} and {@code $2y$} are
 * accepted; Apache's htpasswd documentation, "bcrypt"). Blank lines and lines starting with
 * {@code #} are skipped. MD5 ({@code $apr1$}), SHA-1 ({@code {SHA}}), crypt and plain-text
 * entries are refused: they are fast to guess.
 *
 * @param hashes bcrypt hash by user name
 */
public record Htpasswd(Map<String, String> hashes) {

  private static final Pattern BCRYPT = Pattern.compile("\\$2[aby]\\$(0[4-9]|[12][0-9]|3[01])\\$[./A-Za-z0-9]{53}");

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
    Map<String, String> hashes = new LinkedHashMap<>();
    String[] lines = text.split("\r?\n", -1);
    for (int i = 0; i < lines.length; i++) {
      String line = lines[i].strip();
      if (line.isEmpty() || line.startsWith("#")) {
        continue;
      }
      int colon = line.indexOf(':');
      if (colon <= 0) {
        throw new IllegalArgumentException("line " + (i + 1) + ": expected name:<bcrypt hash>");
      }
      String name = line.substring(0, colon);
      String hash = line.substring(colon + 1);
      if (!BCRYPT.matcher(hash).matches()) {
        throw new IllegalArgumentException("line " + (i + 1) + ", user '" + name + "': only bcrypt hashes are accepted"
            + " (create them with 'htpasswd -B'); found " + scheme(hash));
      }
      if (hashes.putIfAbsent(name, hash) != null) {
        throw new IllegalArgumentException("line " + (i + 1) + ": user '" + name + "' is given twice");
      }
    }
    return new Htpasswd(hashes);
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
