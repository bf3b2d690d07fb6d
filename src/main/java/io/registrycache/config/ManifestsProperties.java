package io.registrycache.config;

import java.time.Duration;
import org.springframework.boot.context.properties.ConfigurationProperties;
import org.springframework.boot.context.properties.bind.DefaultValue;

/**
 * {@code registry-cache.manifests.*}: manifest limits and caching.
 *
 * @param memoryMaxBytes upper bound of the in-memory manifest cache, in bytes of manifest bodies;
 *     default 64 MiB
 * @param maxSizeBytes largest manifest accepted from an upstream, in bytes; default 4 MiB (the
 *     limit the OCI Distribution Spec suggests registries accept)
 * @param tagTtl how long a cached tag is served before it is revalidated with a {@code HEAD} to the
 *     upstream; default 5 min
 * @param tagListMaxTags most tags a repository's tag list may have: the whole list is fetched to be
 *     sorted and paged, so beyond this the listing fails rather than hold an unbounded list;
 *     default 100,000
 */
@ConfigurationProperties("registry-cache.manifests")
public record ManifestsProperties(
    @DefaultValue("67108864") long memoryMaxBytes,
    @DefaultValue("4194304") int maxSizeBytes,
    @DefaultValue("5m") Duration tagTtl,
    @DefaultValue("100000") int tagListMaxTags) {}
