package io.registrycache.oci;

import java.util.ArrayList;
import java.util.List;
import java.util.Objects;
import tools.jackson.core.JacksonException;
import tools.jackson.databind.JsonNode;
import tools.jackson.databind.json.JsonMapper;

/**
 * What the cache needs to know of a manifest's JSON: its media type and the descriptors it
 * references (OCI Image Spec v1.1, "Image Manifest" and "Image Index"; Docker Image Manifest V2
 * Schema 2). The bytes themselves are never re-serialized.
 *
 * @param mediaType the media type, from the body's {@code mediaType} or else from the upstream's
 *     {@code Content-Type}
 * @param references config, layers, subject (manifests) or child manifests (indexes)
 */
public record ManifestContent(MediaType mediaType, List<Descriptor> references) {

  private static final JsonMapper JSON = Json.MAPPER;

  /**
   * A referenced descriptor.
   *
   * @param digest the content's digest
   * @param mediaType its media type; may be {@code null}
   * @param size its size in bytes, or -1 when absent
   * @param platform {@code os/architecture[/variant]} of an index entry, else {@code null}
   */
  public record Descriptor(Digest digest, String mediaType, long size, String platform) {
    /**
     * Whether the content is in the registry: foreign (non-distributable) layers are not, clients
     * fetch them from their URLs (OCI Image Spec, "Non-distributable layers").
     */
    public boolean distributable() {
      return mediaType == null
          || !(mediaType.contains("foreign") || mediaType.contains("nondistributable"));
    }
  }

  /** Canonical form: an immutable list of references. */
  public ManifestContent {
    references = List.copyOf(references);
  }

  /** A manifest whose body could not be read again: its media type, no references. */
  public static ManifestContent unreadable(MediaType mediaType) {
    return new ManifestContent(mediaType, List.of());
  }

  /** The digests of {@link #references}, in order. */
  public List<Digest> referencedDigests() {
    return references.stream().map(Descriptor::digest).toList();
  }

  /**
   * {@code os/architecture[/variant]} of an index's children, in order; empty for an image
   * manifest.
   */
  public List<String> platforms() {
    return references.stream().map(Descriptor::platform).filter(Objects::nonNull).toList();
  }

  /** Whether the manifest is an image index or a Docker manifest list. */
  public boolean isIndex() {
    return mediaType.isIndex();
  }

  /**
   * Parses and checks a manifest body.
   *
   * @param body the raw bytes
   * @param contentType the upstream's {@code Content-Type}; may be {@code null}
   * @throws OciException {@code MANIFEST_INVALID} (400) when the body is not a JSON object, has no
   *     media type at all, its media type (from the body, else a non-generic {@code Content-Type})
   *     is not one of {@link MediaTypes#ALL_MANIFESTS}, is a schema 1 manifest, its {@code
   *     mediaType} contradicts a manifest {@code Content-Type}, or a descriptor's digest is
   *     malformed
   */
  public static ManifestContent parse(byte[] body, MediaType contentType) {
    return parse(body, contentType == null ? null : contentType.value());
  }

  /**
   * Parses and checks a manifest body, as {@link #parse(byte[], MediaType)}.
   *
   * @param contentType the upstream's {@code Content-Type}, parameters allowed; may be {@code null}
   */
  public static ManifestContent parse(byte[] body, String contentType) {
    JsonNode root;
    try {
      root = JSON.readTree(body);
    } catch (JacksonException e) {
      throw invalid("not JSON (" + e.getOriginalMessage() + ")");
    }
    if (root == null || !root.isObject()) {
      throw invalid("not a JSON object");
    }
    JsonNode schemaVersion = root.get("schemaVersion");
    if (schemaVersion != null && schemaVersion.isNumber() && schemaVersion.intValue() == 1) {
      throw invalid("Docker schema 1 manifests are not supported");
    }
    String declared =
        root.path("mediaType").isString() ? root.get("mediaType").stringValue() : null;
    String header = MediaTypes.essence(contentType);
    String mediaType;
    if (declared != null && !declared.isBlank()) {
      if (header != null && MediaTypes.ALL_MANIFESTS.contains(header) && !header.equals(declared)) {
        throw invalid("mediaType " + declared + " contradicts Content-Type " + header);
      }
      mediaType = declared;
    } else if (header != null && MediaTypes.ALL_MANIFESTS.contains(header)) {
      mediaType = header;
    } else if (header != null && !header.isBlank() && !MediaTypes.isGeneric(header)) {
      // A web page or an error body, not a manifest (OCI Distribution Spec: manifest media types
      // only).
      throw invalid(
          "Content-Type " + header + " is not a manifest media type and the body declares none");
    } else if (root.has("manifests")) {
      mediaType = MediaTypes.OCI_INDEX;
    } else if (root.has("config")) {
      mediaType = MediaTypes.OCI_MANIFEST;
    } else {
      throw invalid("no media type in the body or the Content-Type");
    }
    if (!MediaTypes.ALL_MANIFESTS.contains(mediaType)) {
      throw invalid(
          "media type " + mediaType + " is not a manifest media type " + MediaTypes.ALL_MANIFESTS);
    }
    List<Descriptor> refs = new ArrayList<>();
    addDescriptor(refs, root.get("config"), null);
    for (JsonNode layer : root.path("layers")) {
      addDescriptor(refs, layer, null);
    }
    for (JsonNode child : root.path("manifests")) {
      JsonNode p = child.get("platform");
      String platform = null;
      if (p != null && p.isObject()) {
        platform = p.path("os").asString("") + "/" + p.path("architecture").asString("");
        String variant = p.path("variant").asString("");
        if (!variant.isEmpty()) {
          platform += "/" + variant;
        }
      }
      addDescriptor(refs, child, platform);
    }
    return new ManifestContent(new MediaType(mediaType), List.copyOf(refs));
  }

  private static void addDescriptor(List<Descriptor> refs, JsonNode node, String platform) {
    if (node == null || !node.isObject()) {
      return;
    }
    JsonNode digest = node.get("digest");
    if (digest == null || !digest.isString()) {
      throw invalid("descriptor without a digest");
    }
    Digest parsed;
    try {
      parsed = Digest.parse(digest.stringValue());
    } catch (OciException e) {
      throw invalid("descriptor digest: " + e.getMessage());
    }
    JsonNode mt = node.get("mediaType");
    JsonNode size = node.get("size");
    refs.add(
        new Descriptor(
            parsed,
            mt != null && mt.isString() ? mt.stringValue() : null,
            size != null && size.isNumber() ? size.longValue() : -1,
            platform));
  }

  private static OciException invalid(String why) {
    return new OciException(
        OciErrorCode.MANIFEST_INVALID, "invalid manifest from upstream: " + why);
  }
}
