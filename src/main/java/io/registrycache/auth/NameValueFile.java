package io.registrycache.auth;

import java.util.LinkedHashMap;
import java.util.Map;

/**
 * The one reader of the cache's {@code name:value} files (htpasswd, robot tokens): one entry per
 * line, split at the first {@code :}, name and value stripped of surrounding white space; blank
 * lines and lines starting with {@code #} are skipped; CRLF and LF line ends.
 */
final class NameValueFile {

  private NameValueFile() {}

  /**
   * Reads one entry's value; throws {@link IllegalArgumentException} with a reason that never
   * quotes the value.
   */
  @FunctionalInterface
  interface ValueReader<V> {
    V read(String name, String value);
  }

  /**
   * Reads {@code text}.
   *
   * @param entry what an entry is, for messages ({@code user}, {@code robot})
   * @param shape the expected line, for messages ({@code name:<bcrypt hash>})
   * @return the values by name, in file order
   * @throws IllegalArgumentException naming the line (and the entry, never its value) of the first
   *     line without a {@code :}, with an empty name, a name given twice, or a value {@code reader}
   *     refuses
   */
  static <V> Map<String, V> parse(String text, String entry, String shape, ValueReader<V> reader) {
    Map<String, V> values = new LinkedHashMap<>();
    String[] lines = text.split("\r?\n", -1);
    for (int i = 0; i < lines.length; i++) {
      String line = lines[i].strip();
      if (line.isEmpty() || line.startsWith("#")) {
        continue;
      }
      int colon = line.indexOf(':');
      String name = colon < 0 ? "" : line.substring(0, colon).strip();
      if (name.isEmpty()) {
        throw new IllegalArgumentException("line " + (i + 1) + ": expected " + shape);
      }
      V value;
      try {
        value = reader.read(name, line.substring(colon + 1).strip());
      } catch (IllegalArgumentException e) {
        throw new IllegalArgumentException(
            "line " + (i + 1) + ", " + entry + " '" + name + "': " + e.getMessage());
      }
      if (values.putIfAbsent(name, value) != null) {
        throw new IllegalArgumentException(
            "line " + (i + 1) + ": " + entry + " '" + name + "' is given twice");
      }
    }
    return values;
  }
}
