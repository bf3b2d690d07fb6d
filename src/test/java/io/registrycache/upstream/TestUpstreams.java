package io.registrycache.upstream;

import io.registrycache.config.RegistryCacheProperties;
import java.net.URI;
import java.util.Set;
import java.util.function.Consumer;

/** {@link Upstream}s for tests of this package, as the configuration would make them. */
final class TestUpstreams {

  private TestUpstreams() {}

  /** An {@link Upstream} for tests. */
  static Upstream upstream(String key, String url, Consumer<RegistryCacheProperties.Upstream> customize) {
    RegistryCacheProperties.Upstream settings = new RegistryCacheProperties.Upstream();
    settings.setUrl(url);
    URI uri = URI.create(url);
    settings.setHost(uri.getAuthority());
    customize.accept(settings);
    return new Upstream(key, uri.getAuthority(), uri, Set.of(), false, settings);
  }
}
