package io.registrycache.oci;

/**
 * A repository name as the OCI Distribution Spec v1.1 defines it ("Pulling manifests", the {@code
 * <name>} grammar): lowercase path components separated by {@code /}, each matching {@code
 * [a-z0-9]+((\.|_|__|-+)[a-z0-9]+)*}, at most 255 characters in total.
 *
 * @param value the name, e.g. {@code library/alpine}
 */
public record RepositoryName(String value) {

  /** Most clients cap registry host plus name at 255 characters. */
  public static final int MAX_LENGTH = 255;

  /** The component grammar, for error messages; checked by {@link Grammar#nameComponent}. */
  private static final String COMPONENT = "[a-z0-9]+((\\.|_|__|-+)[a-z0-9]+)*";

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
    int from = 0;
    while (from <= value.length()) {
      int slash = value.indexOf('/', from);
      int to = slash < 0 ? value.length() : slash;
      if (from == to) {
        throw OciException.nameInvalid(value, "empty path component");
      }
      if (!Grammar.nameComponent(value, from, to)) {
        throw OciException.nameInvalid(
            value, "component '" + value.substring(from, to) + "' must match " + COMPONENT);
      }
      from = to + 1;
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
