package io.registrycache.admin;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Locale;

/**
 * Which platforms of an image index to preload. A wanted platform is {@code
 * os/architecture[/variant]}; it matches an index entry whose platform starts with the same
 * components, so {@code linux/arm64} takes {@code linux/arm64/v8} too, while {@code linux/arm/v7}
 * takes only that variant. No wanted platform means every entry of the index (attestation entries
 * with platform {@code unknown/unknown} included).
 *
 * @param wanted normalised (lower case) platforms; empty = all
 */
public record PreloadPlatforms(List<String> wanted) {

  /** Every platform. */
  public static final PreloadPlatforms ALL = new PreloadPlatforms(List.of());

  public PreloadPlatforms {
    wanted = List.copyOf(wanted);
  }

  /**
   * Checks and normalises a list of platforms; {@code null} or empty means all.
   *
   * @throws IllegalArgumentException for an entry that is not {@code os/architecture[/variant]}
   */
  public static PreloadPlatforms of(List<String> platforms) {
    if (platforms == null || platforms.isEmpty()) {
      return ALL;
    }
    List<String> out = new ArrayList<>();
    for (String p : platforms) {
      String s = p == null ? "" : p.strip().toLowerCase(Locale.ROOT);
      String[] parts = s.split("/", -1);
      if (parts.length < 2 || parts.length > 3 || Arrays.stream(parts).anyMatch(String::isEmpty)) {
        throw new IllegalArgumentException(
            "platform '"
                + p
                + "' is not os/architecture[/variant], e.g. linux/amd64 or linux/arm/v7");
      }
      if (!out.contains(s)) {
        out.add(s);
      }
    }
    return new PreloadPlatforms(out);
  }

  /** Whether every platform is wanted. */
  public boolean all() {
    return wanted.isEmpty();
  }

  /**
   * Whether an index entry with {@code platform} ({@code os/architecture[/variant]}, or {@code
   * null} when the entry has none) is to be preloaded. An entry without platform is taken only when
   * every platform is wanted.
   */
  public boolean matches(String platform) {
    if (all()) {
      return true;
    }
    if (platform == null) {
      return false;
    }
    String p = platform.toLowerCase(Locale.ROOT);
    for (String w : wanted) {
      if (p.equals(w) || p.startsWith(w + "/")) {
        return true;
      }
    }
    return false;
  }
}
