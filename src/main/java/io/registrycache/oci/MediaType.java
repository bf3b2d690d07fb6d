package io.registrycache.oci;

import java.util.Locale;
import java.util.regex.Pattern;

/**
 * A media type's essence, {@code type/subtype} without parameters, lowercase (RFC 6838 section 4.2;
 * OCI Image Spec, "Media Types"). Every instance is valid (checked on construction).
 *
 * @param value e.g. {@code application/vnd.oci.image.manifest.v1+json}
 */
public record MediaType(String value) {

  private static final String NAME = "[a-z0-9][a-z0-9!#$&^_.+-]{0,126}";
  private static final Pattern ESSENCE = Pattern.compile(NAME + "/" + NAME);

  /**
   * @throws IllegalArgumentException when {@code value} is not a lowercase {@code type/subtype}
   */
  public MediaType {
    if (value == null || !ESSENCE.matcher(value).matches()) {
      throw new IllegalArgumentException(
          "not a media type (type/subtype, lowercase): '" + OciException.abbreviate(value) + "'");
    }
  }

  /**
   * The essence of a {@code Content-Type}-like value: parameters dropped, lowercased.
   *
   * @throws IllegalArgumentException when what remains is not {@code type/subtype}
   */
  public static MediaType parse(String value) {
    String essence = value == null ? null : MediaTypes.essence(value);
    return new MediaType(essence == null ? null : essence.toLowerCase(Locale.ROOT));
  }

  /**
   * Whether this is one of the manifest types a container runtime pulls ({@link
   * MediaTypes#ALL_MANIFESTS}).
   */
  public boolean isManifest() {
    return MediaTypes.ALL_MANIFESTS.contains(value);
  }

  /** Whether this is an image index or a Docker manifest list. */
  public boolean isIndex() {
    return MediaTypes.isIndex(value);
  }

  @Override
  public String toString() {
    return value;
  }
}
