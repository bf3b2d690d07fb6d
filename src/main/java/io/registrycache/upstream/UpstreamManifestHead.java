package io.registrycache.upstream;

import io.registrycache.oci.Digest;

/**
 * What a HEAD on a manifest told: enough to know whether a cached tag still points where it did.
 *
 * @param digest the upstream's {@code Docker-Content-Digest}; {@code null} when it sent none
 * @param mediaType {@code Content-Type} without parameters; may be {@code null}
 * @param size {@code Content-Length} in bytes, or -1 when unknown
 */
public record UpstreamManifestHead(Digest digest, String mediaType, long size) {}
