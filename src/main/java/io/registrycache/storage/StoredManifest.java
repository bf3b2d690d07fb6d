package io.registrycache.storage;

import io.registrycache.oci.Digest;
import io.registrycache.oci.MediaType;

/**
 * A manifest kept by the cache, exactly as the upstream sent it.
 *
 * @param digest digest of {@code body}
 * @param mediaType the manifest's media type (one of the manifest types)
 * @param body the raw bytes; never modified, never re-serialized
 */
public record StoredManifest(Digest digest, MediaType mediaType, byte[] body) {}
