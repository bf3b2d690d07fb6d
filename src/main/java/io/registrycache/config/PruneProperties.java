package io.registrycache.config;

import java.time.Duration;
import org.springframework.boot.context.properties.ConfigurationProperties;
import org.springframework.boot.context.properties.bind.DefaultValue;

/**
 * {@code registry-cache.prune.*}: scheduled pruning, off while {@code schedule} is unset
 * (docs/operations.md).
 *
 * @param schedule interval between two scheduled prunes, e.g. {@code 1h}; unset (the default) means
 *     never
 * @param keepPulledWithin keep what was pulled within this duration, e.g. {@code 14d}: tags whose
 *     manifest was last pulled longer ago are removed, with the content only they used; unset means
 *     no age limit
 * @param keepPerRepository keep at most this many most recently pulled tags per repository; 0 (the
 *     default) means no limit
 */
@ConfigurationProperties("registry-cache.prune")
public record PruneProperties(
    Duration schedule, Duration keepPulledWithin, @DefaultValue("0") int keepPerRepository) {}
