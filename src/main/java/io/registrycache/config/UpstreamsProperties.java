package io.registrycache.config;

import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.Map;
import org.springframework.boot.context.properties.ConfigurationProperties;
import org.springframework.boot.context.properties.bind.DefaultValue;

/**
 * The upstream registries and how requests reach them: the top-level keys {@code
 * registry-cache.default-upstream}, {@code allow-any-upstream}, {@code offline} and the map {@code
 * registry-cache.upstreams.<key>.*}. Upstream keys that appear only in the environment are found in
 * Spring Boot's canonical form ({@code REGISTRYCACHE_UPSTREAMS_<KEY>_URL}, dashes dropped). With no
 * upstream configured, a built-in {@code local} one (localhost:5000) is used; configuring any
 * upstream replaces it (see {@code upstream.Upstreams}).
 *
 * @param defaultUpstream key of the upstream that serves bare-form requests ({@code
 *     /v2/<name>/...}); default {@code local}; left at {@code local} with upstreams of other keys,
 *     it means the only one, else none
 * @param allowAnyUpstream whether a registry host that is not configured may be used (as {@code
 *     https://<host>}, anonymous); default false: the cache is not an open proxy
 * @param offline air-gapped mode: no upstream is ever contacted; what is cached is served (tags
 *     without revalidation), everything else is {@code MANIFEST_UNKNOWN} / {@code BLOB_UNKNOWN};
 *     default false
 * @param upstreams upstream registries by key; default none (the built-in {@code local} one)
 */
@ConfigurationProperties("registry-cache")
public record UpstreamsProperties(
    @DefaultValue("local") String defaultUpstream,
    @DefaultValue("false") boolean allowAnyUpstream,
    @DefaultValue("false") boolean offline,
    @DefaultValue Map<String, UpstreamProperties> upstreams) {

  public UpstreamsProperties {
    upstreams = Collections.unmodifiableMap(new LinkedHashMap<>(upstreams));
  }
}
