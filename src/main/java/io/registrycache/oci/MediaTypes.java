package io.registrycache.oci;

import java.util.List;
import java.util.Locale;

/** Manifest media types (OCI Image Spec v1.1 and Docker Image Manifest V2 Schema 2). */
public final class MediaTypes {

  public static final String OCI_INDEX = "application/vnd.oci.image.index.v1+json";
  public static final String OCI_MANIFEST = "application/vnd.oci.image.manifest.v1+json";
  public static final String DOCKER_MANIFEST_LIST =
      "application/vnd.docker.distribution.manifest.list.v2+json";
  public static final String DOCKER_MANIFEST =
      "application/vnd.docker.distribution.manifest.v2+json";

  /** The four types a container runtime accepts, index types first. */
  public static final List<String> ALL_MANIFESTS =
      List.of(OCI_INDEX, DOCKER_MANIFEST_LIST, OCI_MANIFEST, DOCKER_MANIFEST);

  private MediaTypes() {}

  /** Whether the type is an image index or a Docker manifest list. */
  public static boolean isIndex(String mediaType) {
    return OCI_INDEX.equals(mediaType) || DOCKER_MANIFEST_LIST.equals(mediaType);
  }

  /**
   * Whether {@code essence} says nothing about which manifest it is ({@code application/json},
   * {@code application/octet-stream}, {@code text/plain}): the body's structure decides then.
   */
  public static boolean isGeneric(String essence) {
    return "application/json".equals(essence)
        || "application/octet-stream".equals(essence)
        || "text/plain".equals(essence);
  }

  /** {@code mediaType} without parameters, lowercased; {@code null} stays {@code null}. */
  public static String essence(String mediaType) {
    if (mediaType == null) {
      return null;
    }
    int semicolon = mediaType.indexOf(';');
    return (semicolon < 0 ? mediaType : mediaType.substring(0, semicolon))
        .trim()
        .toLowerCase(Locale.ROOT);
  }
}
