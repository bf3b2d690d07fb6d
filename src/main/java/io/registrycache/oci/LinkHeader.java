package io.registrycache.oci;

import java.util.Locale;
import java.util.Optional;

/**
 * The {@code Link} header of a paged list (OCI Distribution Spec v1.1, "Listing Tags" and "Listing
 * Referrers"; RFC 8288): read and written here only. A header may carry several links, separated by
 * commas, each {@code <target>} with parameters; only a link whose {@code rel} is {@code next}
 * (quoted or not, among other relation types or alone) names the next page.
 */
public final class LinkHeader {

  private LinkHeader() {}

  /** {@code <target>; rel="next"}. */
  public static String next(String target) {
    return "<" + target + ">; rel=\"next\"";
  }

  /**
   * The target of the link with relation type {@code next} in a {@code Link} header value, as
   * written (a reference to resolve against the request's URI); empty when there is none or the
   * value is malformed.
   */
  public static Optional<String> nextTarget(String header) {
    if (header == null) {
      return Optional.empty();
    }
    int at = 0;
    while (true) {
      int open = header.indexOf('<', at);
      if (open < 0) {
        return Optional.empty();
      }
      int close = header.indexOf('>', open + 1);
      if (close < 0) {
        return Optional.empty();
      }
      int end =
          header.indexOf(
              '<', close + 1); // parameters run to the next link (a '<' is not legal in them)
      String params = header.substring(close + 1, end < 0 ? header.length() : end);
      if (relIsNext(params)) {
        return Optional.of(header.substring(open + 1, close));
      }
      if (end < 0) {
        return Optional.empty();
      }
      at = end;
    }
  }

  /**
   * Whether the parameters {@code ; rel="prev next"; title=...} name the relation type {@code
   * next}.
   */
  private static boolean relIsNext(String params) {
    for (String param : params.split(";", -1)) {
      String p = param.strip();
      int eq = p.indexOf('=');
      if (eq < 0 || !p.substring(0, eq).strip().equalsIgnoreCase("rel")) {
        continue;
      }
      String value = p.substring(eq + 1).strip();
      if (value.endsWith(",")) {
        value = value.substring(0, value.length() - 1).strip();
      }
      if (value.length() >= 2 && value.startsWith("\"") && value.endsWith("\"")) {
        value = value.substring(1, value.length() - 1);
      }
      for (String type : value.toLowerCase(Locale.ROOT).split("\\s+", -1)) {
        if (type.equals("next")) {
          return true;
        }
      }
    }
    return false;
  }
}
