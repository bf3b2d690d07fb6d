package io.registrycache.config;

import org.springframework.boot.context.properties.ConfigurationProperties;
import org.springframework.boot.context.properties.bind.DefaultValue;

/**
 * {@code registry-cache.access-log.*}: one line per {@code /v2} request on the logger {@code
 * registry-cache.access}.
 *
 * @param enabled whether to write it; default false
 */
@ConfigurationProperties("registry-cache.access-log")
public record AccessLogProperties(@DefaultValue("false") boolean enabled) {}
