package io.registrycache.admin;

import io.registrycache.oci.OciErrorCode;
import io.registrycache.oci.OciException;
import io.registrycache.oci.Reference;

/**
 * One image reference to preload, in the syntax of {@code docker pull} / containerd: {@code
 * [registry-host/]name[:tag][@digest]}, e.g. {@code localhost:5000/demo/app:v1}, {@code
 * registry.example.com/team/x@sha256:...} or {@code team/app} (the default upstream, tag {@code
 * latest}).
 *
 * <p>The registry host is recognised the way the registry API does it ({@code
 * api/RequestTarget#resolve}: the first component contains a {@code .} or {@code :} or is {@code
 * localhost}); {@link #rawName()} keeps it, so it can be resolved exactly like an in-path request.
 * With both a tag and a digest the digest wins, as with {@code docker pull}: the manifest is
 * fetched by digest and no tag is linked.
 *
 * @param text the reference as given (trimmed)
 * @param rawName the repository part including the registry host, e.g. {@code
 *     localhost:5000/demo/app}
 * @param reference the tag or digest to fetch
 */
public record PreloadReference(String text, String rawName, Reference reference) {

  /** The tag used when a reference names neither tag nor digest. */
  public static final String DEFAULT_TAG = "latest";

  /**
   * Parses a reference.
   *
   * @throws OciException {@code NAME_INVALID}, {@code TAG_INVALID} or {@code DIGEST_INVALID} (all
   *     400) when it is malformed; the repository name itself is checked when it is resolved
   */
  public static PreloadReference parse(String value) {
    String text = value == null ? "" : value.strip();
    if (text.isEmpty() || text.chars().anyMatch(Character::isWhitespace)) {
      throw OciException.nameInvalid(
          text, "an image reference is one word, e.g. registry.example.com/team/app:v1");
    }
    String name = text;
    String digest = null;
    int at = text.indexOf('@');
    if (at >= 0) {
      name = text.substring(0, at);
      digest = text.substring(at + 1);
    }
    String tag = null;
    int colon = name.lastIndexOf(':');
    if (colon > name.lastIndexOf('/')) {
      tag = name.substring(colon + 1);
      name = name.substring(0, colon);
    }
    if (name.isEmpty() || name.startsWith("/") || name.endsWith("/")) {
      throw OciException.nameInvalid(text, "no repository name");
    }
    Reference reference;
    if (digest != null) {
      if (tag != null) {
        Reference.parse(tag); // still must be a valid tag
      }
      reference = Reference.parse(digest);
      if (!(reference instanceof Reference.ByDigest)) {
        throw new OciException(
            OciErrorCode.DIGEST_INVALID, "invalid digest '" + digest + "' in " + text);
      }
    } else {
      reference = Reference.parse(tag == null ? DEFAULT_TAG : tag);
    }
    return new PreloadReference(text, name, reference);
  }

  @Override
  public String toString() {
    return text;
  }
}
