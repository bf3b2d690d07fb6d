package io.registrycache.oci;

import java.util.regex.Pattern;

/**
 * A repository name as the OCI Distribution Spec v1.1 defines it ("Pulling manifests", the
 * {@code <name>} grammar): lowercase path components separated by {@code /}, each matching
 * {@code [a-z0-9]+((\.|_|__|-+)[a-z0-9]+)*}, at most 255 characters in total.
 *
 * @param value the name, e.g. {@code library/alpine}
 */
public record RepositoryName(String value) {

  /** Most clients cap registry host plus name at 255 characters. */
  public static final int MAX_LENGTH = 255;

  private static final Pattern COMPONENT = Pattern.compile("[a-z0-9]+(?:(?:\\.|_|__|-+)[a-z0-9]+)*");

  /**
   * Validates the name.
   *
   * @throws OciException {@code NAME_INVALID} (400) when the name is empty, too long, has empty
   *     components, uppercase letters or characters outside the grammar
   */
  public RepositoryName {
    if (value == null || value.isEmpty()) {
      throw OciException.nameInvalid(value, "empty");
    }
    if (value.length() > MAX_LENGTH) {
      throw OciException.nameInvalid(value, "longer than " + MAX_LENGTH + " characters");
    }
    for (String component : value.split("/", -1)) {
      if (component.isEmpty()) {
        throw OciException.nameInvalid(value, "empty path component");
      }
      if (!COMPONENT.matcher(component).matches()) {
        throw OciException.nameInvalid(
            value, "component '" + component + "' must match " + COMPONENT.pattern());
      }
    }
  }

  /**
   * Parses and validates a repository name.
   *
   * @throws OciException {@code NAME_INVALID} (400), as the constructor
   */
  public static RepositoryName parse(String value) {
    return new RepositoryName(value);
  }

  /** Number of {@code /}-separated components. */
  public int componentCount() {
    return value.split("/").length;
  }

  @Override
  public String toString() {
    return value;
  }
}
