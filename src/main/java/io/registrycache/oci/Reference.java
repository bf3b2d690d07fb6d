package io.registrycache.oci;

import java.util.Objects;

/**
 * The {@code <reference>} of a manifest request: a tag or a digest (OCI Distribution Spec v1.1,
 * "Pulling manifests"). Tags are mutable, digests are immutable.
 */
public sealed interface Reference permits Reference.Tag, Reference.ByDigest {

  /** Tag grammar: {@code [a-zA-Z0-9_][a-zA-Z0-9._-]{0,127}}, case-sensitive (checked by hand). */
  String TAG = "[a-zA-Z0-9_][a-zA-Z0-9._-]{0,127}";

  /**
   * Parses a reference: a digest when it contains {@code :}, else a tag.
   *
   * @throws OciException {@code DIGEST_INVALID} for a malformed digest, {@code TAG_INVALID} (400)
   *     for a malformed tag
   */
  static Reference parse(String value) {
    if (Digest.looksLikeDigest(value)) {
      return new ByDigest(Digest.parse(value));
    }
    return new Tag(value);
  }

  /**
   * A mutable tag, e.g. {@code latest}.
   *
   * @param name the tag; validated on construction ({@code TAG_INVALID}, 400, when it does not
   *     match {@link #TAG})
   */
  record Tag(String name) implements Reference {
    public Tag {
      if (name == null || !Grammar.tag(name)) {
        throw new OciException(
            OciErrorCode.TAG_INVALID,
            "invalid tag '" + OciException.abbreviate(name) + "': must match " + TAG);
      }
    }

    @Override
    public String toString() {
      return name;
    }
  }

  /** An immutable manifest digest (never {@code null}). */
  record ByDigest(Digest digest) implements Reference {
    public ByDigest {
      Objects.requireNonNull(digest, "digest");
    }

    @Override
    public String toString() {
      return digest.toString();
    }
  }
}
