package io.registrycache.oci;

/**
 * The OCI grammars checked by hand, character by character, instead of with regular expressions:
 * they run on every request (JFR: regex matching was 16 % of the CPU of a warm pull, docs/
 * performance.md). Each method accepts exactly what the regular expression in its comment accepts;
 * {@code GrammarTest} checks that against the regular expressions over generated input.
 */
final class Grammar {

  private Grammar() {}

  private static boolean lowerAlnum(char c) {
    return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
  }

  private static boolean alnum(char c) {
    return lowerAlnum(c) || (c >= 'A' && c <= 'Z');
  }

  /**
   * One repository name component, {@code value[from, to)}: {@code
   * [a-z0-9]+((\.|_|__|-+)[a-z0-9]+)*} (OCI Distribution Spec v1.1, "Pulling manifests").
   */
  static boolean nameComponent(String value, int from, int to) {
    if (from >= to || !lowerAlnum(value.charAt(from)) || !lowerAlnum(value.charAt(to - 1))) {
      return false;
    }
    int i = from;
    while (i < to) {
      char c = value.charAt(i);
      if (lowerAlnum(c)) {
        i++;
        continue;
      }
      // a separator: '.', '_', '__' or one or more '-', between alphanumerics
      int start = i;
      if (c == '.') {
        i++;
      } else if (c == '_') {
        i++;
        if (i < to && value.charAt(i) == '_') {
          i++;
        }
      } else if (c == '-') {
        while (i < to && value.charAt(i) == '-') {
          i++;
        }
      } else {
        return false;
      }
      if (i == start || i >= to || !lowerAlnum(value.charAt(i))) {
        return false;
      }
    }
    return true;
  }

  /** A tag: {@code [a-zA-Z0-9_][a-zA-Z0-9._-]{0,127}}. */
  static boolean tag(String value) {
    int n = value.length();
    if (n == 0 || n > 128) {
      return false;
    }
    char first = value.charAt(0);
    if (!alnum(first) && first != '_') {
      return false;
    }
    for (int i = 1; i < n; i++) {
      char c = value.charAt(i);
      if (!alnum(c) && c != '_' && c != '.' && c != '-') {
        return false;
      }
    }
    return true;
  }

  /**
   * A digest string: {@code [a-z0-9]+([+._-][a-z0-9]+)*:[a-zA-Z0-9=_-]+} (OCI Image Spec,
   * "Digests").
   */
  static boolean digest(String value) {
    int colon = value.indexOf(':');
    if (colon <= 0 || colon == value.length() - 1) {
      return false;
    }
    // algorithm: components of [a-z0-9]+ joined by single separators
    boolean previousWasSeparator = true;
    for (int i = 0; i < colon; i++) {
      char c = value.charAt(i);
      if (lowerAlnum(c)) {
        previousWasSeparator = false;
      } else if ((c == '+' || c == '.' || c == '_' || c == '-') && !previousWasSeparator) {
        previousWasSeparator = true;
      } else {
        return false;
      }
    }
    if (previousWasSeparator) {
      return false;
    }
    for (int i = colon + 1; i < value.length(); i++) {
      char c = value.charAt(i);
      if (!alnum(c) && c != '=' && c != '_' && c != '-') {
        return false;
      }
    }
    return true;
  }

  /** Lowercase hex, {@code [a-f0-9]+}. */
  static boolean lowerHex(String value) {
    if (value.isEmpty()) {
      return false;
    }
    for (int i = 0; i < value.length(); i++) {
      char c = value.charAt(i);
      if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) {
        return false;
      }
    }
    return true;
  }
}
