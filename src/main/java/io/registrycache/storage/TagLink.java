package io.registrycache.storage;

import io.registrycache.oci.Digest;
import java.time.Instant;

/**
 * Where a cached tag points, and when the upstream last confirmed it.
 *
 * @param digest the manifest digest the tag resolved to
 * @param validatedAt when the upstream last confirmed (or first gave) this link
 */
public record TagLink(Digest digest, Instant validatedAt) {}
