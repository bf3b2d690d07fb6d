package io.registrycache.upstream;

import io.registrycache.oci.Digest;

/**
 * A manifest exactly as an upstream sent it.
 *
 * @param body the raw bytes of the response body, never re-serialized
 * @param mediaType the response {@code Content-Type} without parameters; may be {@code null}
 * @param upstreamDigest the upstream's {@code Docker-Content-Digest} header; may be {@code null}
 */
@SuppressWarnings("ArrayRecordComponent") // a carrier of bytes, never compared or hashed
public record UpstreamManifest(byte[] body, String mediaType, Digest upstreamDigest) {}
