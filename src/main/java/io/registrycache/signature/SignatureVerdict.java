package io.registrycache.signature;

import io.registrycache.oci.Digest;
import io.registrycache.oci.OciErrorCode;
import io.registrycache.oci.OciException;

/**
 * What {@link SignatureVerifier} found for one image: a signature that verifies, or why none does.
 */
public sealed interface SignatureVerdict
    permits SignatureVerdict.Verified, SignatureVerdict.Refused {

  /**
   * A key-signed cosign signature of the image verified.
   *
   * @param key the name of the key it verified with ({@link SigningKey#name})
   * @param signatureManifest the digest of the signature manifest the signature was in
   */
  record Verified(String key, Digest signatureManifest) implements SignatureVerdict {}

  /**
   * No signature of the image verified.
   *
   * @param reason why, as a category
   * @param detail what was found, for the error message and the log
   */
  record Refused(Reason reason, String detail) implements SignatureVerdict {

    /** 403 {@code DENIED} naming the reason (OCI Distribution Spec v1.1, "Error Codes"). */
    public OciException denied(String image) {
      return new OciException(
          OciErrorCode.DENIED,
          image + " refused by the signature policy: " + reason.text() + " (" + detail + ")");
    }
  }

  /**
   * Why an image's signatures were refused. When several signatures fail differently, the verdict
   * names the reason that comes first here: a fetch failure, since a signature not read may be a
   * good one, then a bad signature, then a wrong key.
   */
  enum Reason {
    /**
     * A signature manifest, its payload or the list of signatures could not be fetched from the
     * upstream (down, failing, too large); trying again may verify.
     */
    FETCH_FAILED("signature fetch failed"),
    /**
     * A signature verified with a key but does not hold for this image (its payload names another
     * manifest digest, or is not a cosign signature payload), or the signature or payload is
     * malformed or does not match its descriptor's digest.
     */
    BAD_SIGNATURE("bad signature"),
    /**
     * Signatures are there, but none verifies with any configured key: signed with another key, or
     * altered after signing.
     */
    WRONG_KEY("wrong key"),
    /** No cosign signature of the image at the upstream, by either lookup. */
    NO_SIGNATURE("no signature");

    private final String text;

    Reason(String text) {
      this.text = text;
    }

    /** The reason in words, e.g. {@code wrong key}. */
    public String text() {
      return text;
    }
  }
}
