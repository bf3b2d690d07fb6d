package io.registrycache.upstream;

/**
 * A tags list page as the upstream sent it.
 *
 * @param body the JSON body {@code {"name":..., "tags":[...]}}, raw
 * @param link the upstream's {@code Link} header with the next page, or {@code null}
 */
@SuppressWarnings("ArrayRecordComponent") // a carrier of bytes, never compared or hashed
public record UpstreamTags(byte[] body, String link) {}
