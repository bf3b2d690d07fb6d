package io.registrycache.upstream;

import io.registrycache.config.RegistryCacheProperties;
import io.registrycache.config.UpstreamProperties;
import io.registrycache.oci.OciErrorCode;
import io.registrycache.oci.OciException;
import java.net.URI;
import java.util.Collection;
import java.util.LinkedHashSet;
import java.util.Locale;
import java.util.Map;
import java.util.Optional;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import org.springframework.stereotype.Component;

/**
 * The configured upstreams, looked up by registry host name (or alias) and by key.
 *
 * <p>A host that is not configured is refused with {@code DENIED} (403) unless {@code
 * registry-cache.allow-any-upstream} is on, in which case it is reached anonymously at {@code
 * https://<host>} with default settings.
 *
 * <p>Only when no upstream is configured at all is the built-in {@value #BUILT_IN_KEY} upstream
 * ({@code localhost:5000} at {@code http://localhost:5000}) added, for a first {@code
 * spring-boot:run}; configuring any upstream replaces it. Settings under the key {@value
 * #BUILT_IN_KEY} without a {@code url} amend the built-in one.
 */
@Component
public class Upstreams {

  /** Key (and default {@code default-upstream}) of the built-in upstream. */
  public static final String BUILT_IN_KEY = "local";

  static final String BUILT_IN_HOST = "localhost:5000";

  private final Map<String, Upstream> byHost = new ConcurrentHashMap<>();
  private final Map<String, Upstream> byKey = new ConcurrentHashMap<>();
  private final Upstream defaultUpstream;
  private final boolean allowAnyUpstream;

  public Upstreams(RegistryCacheProperties properties) {
    this.allowAnyUpstream = properties.upstreams().allowAnyUpstream();
    Map<String, UpstreamProperties> configured = properties.upstreams().upstreams();
    if (configured.isEmpty()) {
      configured =
          Map.of(
              BUILT_IN_KEY,
              RegistryCacheProperties.upstream(
                  Map.of("host", BUILT_IN_HOST, "url", "http://" + BUILT_IN_HOST)));
    }
    configured.forEach(
        (key, given) -> {
          UpstreamProperties settings = given;
          if (BUILT_IN_KEY.equals(key) && (settings.url() == null || settings.url().isBlank())) {
            // settings given for the built-in upstream (e.g. only its aliases) amend it
            settings =
                settings.withHostAndUrl(
                    settings.host() == null ? BUILT_IN_HOST : settings.host(),
                    "http://" + BUILT_IN_HOST);
          }
          if (settings.url() == null || settings.url().isBlank()) {
            throw new IllegalStateException("registry-cache.upstreams." + key + ".url is not set");
          }
          URI url = URI.create(stripTrailingSlash(settings.url()));
          if (!"http".equals(url.getScheme()) && !"https".equals(url.getScheme())) {
            throw new IllegalStateException(
                "registry-cache.upstreams." + key + ".url must be http or https: " + url);
          }
          String host = settings.host() != null ? settings.host() : url.getAuthority();
          Set<String> aliases = new LinkedHashSet<>();
          settings.aliases().forEach(a -> aliases.add(a.toLowerCase(Locale.ROOT)));
          Upstream upstream =
              new Upstream(
                  key,
                  host.toLowerCase(Locale.ROOT),
                  url,
                  Set.copyOf(aliases),
                  settings.dockerHubNaming(),
                  settings);
          register(upstream);
        });
    String defaultKey = properties.upstreams().defaultUpstream();
    if (BUILT_IN_KEY.equals(defaultKey) && !byKey.containsKey(BUILT_IN_KEY)) {
      // left at its default while the operator's upstreams have other keys: their only upstream,
      // or none (bare-form requests are then refused)
      defaultKey = byKey.size() == 1 ? byKey.keySet().iterator().next() : null;
    }
    this.defaultUpstream =
        defaultKey == null || defaultKey.isBlank() ? null : byKey.get(defaultKey);
    if (defaultKey != null && !defaultKey.isBlank() && defaultUpstream == null) {
      throw new IllegalStateException(
          "registry-cache.default-upstream '"
              + defaultKey
              + "' is not among the configured upstreams "
              + byKey.keySet());
    }
  }

  private void register(Upstream upstream) {
    byKey.put(upstream.key(), upstream);
    byHost.put(upstream.host(), upstream);
    upstream.aliases().forEach(a -> byHost.put(a, upstream));
  }

  /**
   * The upstream for a registry host name as a client named it.
   *
   * @throws OciException {@code DENIED} (403) when the host is not configured and any-upstream mode
   *     is off
   */
  public Upstream forHost(String host) {
    String normalized = host.toLowerCase(Locale.ROOT);
    Upstream upstream = byHost.get(normalized);
    if (upstream != null) {
      return upstream;
    }
    if (!allowAnyUpstream) {
      throw new OciException(
          OciErrorCode.DENIED,
          "upstream registry '"
              + host
              + "' is not configured in this cache (registry-cache.upstreams)");
    }
    return byHost.computeIfAbsent(
        normalized,
        h -> {
          UpstreamProperties settings =
              RegistryCacheProperties.upstream(Map.of("host", h, "url", "https://" + h));
          Upstream dynamic =
              new Upstream(h, h, URI.create("https://" + h), Set.of(), false, settings);
          byKey.put(dynamic.key(), dynamic);
          return dynamic;
        });
  }

  /**
   * The upstream that serves bare-form requests.
   *
   * @throws OciException {@code DENIED} when no default upstream is configured
   */
  public Upstream defaultUpstream() {
    if (defaultUpstream == null) {
      throw new OciException(
          OciErrorCode.DENIED,
          "no default upstream is configured: name the registry host in the path or with ns=");
    }
    return defaultUpstream;
  }

  /** The upstream with the given configuration key, if any. */
  public Optional<Upstream> byKey(String key) {
    return Optional.ofNullable(byKey.get(key));
  }

  /** All upstreams known now. */
  public Collection<Upstream> all() {
    return byKey.values();
  }

  private static String stripTrailingSlash(String url) {
    return url.endsWith("/") ? url.substring(0, url.length() - 1) : url;
  }
}
