package io.registrycache.storage;

import io.registrycache.oci.Digest;

/**
 * A manifest kept by the cache, exactly as the upstream sent it.
 *
 * @param digest digest of {@code body}
 * @param mediaType the manifest's media type, without parameters
 * @param body the raw bytes; never modified, never re-serialized
 */
public record StoredManifest(Digest digest, String mediaType, byte[] body) {}
