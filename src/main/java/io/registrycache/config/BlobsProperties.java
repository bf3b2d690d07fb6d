package io.registrycache.config;

import java.time.Duration;
import org.springframework.boot.context.properties.ConfigurationProperties;
import org.springframework.boot.context.properties.bind.DefaultValue;

/**
 * {@code registry-cache.blobs.*}: blob downloads.
 *
 * @param orphanDownloadTimeout how long a blob download goes on after every client that asked for
 *     it went away, so that the next pull is a hit; default 10 min
 */
@ConfigurationProperties("registry-cache.blobs")
public record BlobsProperties(@DefaultValue("10m") Duration orphanDownloadTimeout) {}
