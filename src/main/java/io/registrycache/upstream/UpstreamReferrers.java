package io.registrycache.upstream;

import java.net.URI;

/**
 * One page of a referrers list as the upstream sent it.
 *
 * @param body the image index JSON, raw
 * @param next the next page's URI (from the upstream's {@code Link: <...>; rel="next"}, resolved
 *     against the upstream URL), or {@code null} on the last page
 */
@SuppressWarnings("ArrayRecordComponent") // a carrier of bytes, never compared or hashed
public record UpstreamReferrers(byte[] body, URI next) {}
