package io.registrycache.testsupport;

import io.registrycache.config.RegistryCacheProperties;
import io.registrycache.upstream.Upstream;
import java.net.URI;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.Set;
import java.util.function.Consumer;

/** {@link Upstream}s for tests, as the configuration would make them. */
public final class TestUpstreams {

  private TestUpstreams() {}

  /**
   * An {@link Upstream} for tests at {@code url}; {@code customize} puts further settings, named as
   * under {@code registry-cache.upstreams.<key>.} (e.g. {@code "redirect.allowed-hosts"}), bound as
   * Spring Boot binds them.
   */
  public static Upstream upstream(String key, String url, Consumer<Map<String, Object>> customize) {
    URI uri = URI.create(url);
    Map<String, Object> settings = new LinkedHashMap<>();
    settings.put("url", url);
    settings.put("host", uri.getAuthority());
    customize.accept(settings);
    return new Upstream(
        key, uri.getAuthority(), uri, Set.of(), false, RegistryCacheProperties.upstream(settings));
  }
}
