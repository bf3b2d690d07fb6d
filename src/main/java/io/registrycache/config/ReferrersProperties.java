package io.registrycache.config;

import java.time.Duration;
import org.springframework.boot.context.properties.ConfigurationProperties;
import org.springframework.boot.context.properties.bind.DefaultValue;

/**
 * {@code registry-cache.referrers.*}: the referrers API (OCI Distribution Spec v1.1, "Listing
 * Referrers").
 *
 * @param ttl how long a referrers list from an upstream is served before it is asked again; short,
 *     so new signatures appear. Past it, a failing upstream still gets the cached list; default 60
 *     s
 * @param pageSize descriptors per response page; longer lists get a {@code Link: <...>;
 *     rel="next"}; default 100
 */
@ConfigurationProperties("registry-cache.referrers")
public record ReferrersProperties(
    @DefaultValue("60s") Duration ttl, @DefaultValue("100") int pageSize) {}
