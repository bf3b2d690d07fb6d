package io.registrycache.storage;

import io.registrycache.oci.Digest;
import io.registrycache.oci.MediaType;

/**
 * A manifest kept by the cache, exactly as the upstream sent it; verified when made: no instance
 * holds bytes that do not have its digest, so whoever holds one need not hash it again.
 *
 * @param digest digest of {@code body}
 * @param mediaType the manifest's media type (one of the manifest types)
 * @param body the raw bytes; never modified, never re-serialized
 */
@SuppressWarnings("ArrayRecordComponent") // a carrier of bytes, never compared or hashed
public record StoredManifest(Digest digest, MediaType mediaType, byte[] body) {
  /**
   * Checks {@code body} against {@code digest}.
   *
   * @throws ContentVerificationException when {@code body} does not have {@code digest} ({@code
   *     DIGEST_INVALID})
   */
  public StoredManifest {
    if (!digest.recompute(body).equals(digest)) {
      throw new ContentVerificationException(
          "manifest " + digest + ": the " + body.length + " bytes do not match the digest");
    }
  }
}
