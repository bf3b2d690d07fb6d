package io.registrycache.admin;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;

/**
 * The preload file ({@code registry-cache.preload.file}): UTF-8 text, one image reference per line;
 * {@code #} starts a comment (to the end of the line), blank lines are skipped. References are
 * checked only when the job runs, so one bad line fails only itself.
 *
 * <p>The admin API takes the same text as a JSON string (see {@link #parseList}): Spring Boot's
 * actuator binds a write operation's JSON body as a map of strings, so a JSON array cannot reach
 * the endpoint.
 */
public final class PreloadFile {

  private PreloadFile() {}

  /**
   * The references of the file, in order, duplicates removed.
   *
   * @throws IOException when the file cannot be read
   */
  public static List<String> read(Path file) throws IOException {
    return parse(Files.readAllLines(file, StandardCharsets.UTF_8));
  }

  /**
   * The items of a list given as one string: separated by commas, blanks or line breaks, {@code #}
   * comments allowed (so a preload file's content is a valid list), duplicates removed. Image
   * references and platforms contain none of these characters.
   */
  public static List<String> parseList(String text) {
    List<String> out = new ArrayList<>();
    if (text == null) {
      return out;
    }
    for (String line : parse(text.lines().toList())) {
      for (String item : line.split("[\\s,]+", -1)) {
        if (!item.isEmpty() && !out.contains(item)) {
          out.add(item);
        }
      }
    }
    return out;
  }

  /** The references in {@code lines}: comments and blank lines dropped, duplicates removed. */
  public static List<String> parse(List<String> lines) {
    List<String> out = new ArrayList<>();
    for (String line : lines) {
      int hash = line.indexOf('#');
      String ref = (hash < 0 ? line : line.substring(0, hash)).strip();
      if (!ref.isEmpty() && !out.contains(ref)) {
        out.add(ref);
      }
    }
    return out;
  }
}
