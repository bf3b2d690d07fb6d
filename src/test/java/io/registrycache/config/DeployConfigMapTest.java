package io.registrycache.config;

import static org.assertj.core.api.Assertions.assertThat;

import java.io.IOException;
import java.io.Reader;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Map;
import org.junit.jupiter.api.Test;
import org.springframework.boot.context.properties.bind.Bindable;
import org.springframework.boot.context.properties.bind.Binder;
import org.springframework.boot.context.properties.source.ConfigurationPropertySources;
import org.springframework.core.env.MutablePropertySources;
import org.springframework.core.env.StandardEnvironment;
import org.springframework.core.env.SystemEnvironmentPropertySource;
import org.yaml.snakeyaml.Yaml;

/**
 * The environment of deploy/kubernetes/configmap.yaml binds as its comments say: the names there are
 * environment variables (envFrom), so a misspelt one would be ignored silently in a cluster.
 */
class DeployConfigMapTest {

  @SuppressWarnings("unchecked")
  private static Binder binderOfConfigMap() throws IOException {
    Map<String, Object> data;
    try (Reader in = Files.newBufferedReader(Path.of("deploy/kubernetes/configmap.yaml"))) {
      Map<String, Object> first = (Map<String, Object>) new Yaml().loadAll(in).iterator().next();
      data = (Map<String, Object>) first.get("data");
    }
    MutablePropertySources sources = new MutablePropertySources();
    sources.addFirst(new SystemEnvironmentPropertySource(
        StandardEnvironment.SYSTEM_ENVIRONMENT_PROPERTY_SOURCE_NAME, data));
    return new Binder(ConfigurationPropertySources.from(sources));
  }

  @Test
  void authenticationAndRateLimitsAreOnWithUsersAndRobotsFromTheMountedSecret() throws IOException {
    Binder binder = binderOfConfigMap();
    AuthProperties auth = binder.bindOrCreate("registry-cache.auth", Bindable.of(AuthProperties.class));
    assertThat(auth.enabled()).isTrue();
    assertThat(auth.htpasswdFile()).isEqualTo(Path.of("/etc/registry-cache/auth/htpasswd"));
    assertThat(auth.tokensFile()).isEqualTo(Path.of("/etc/registry-cache/auth/tokens"));
    assertThat(auth.rules()).singleElement().satisfies(rule -> {
      assertThat(rule.subjects()).containsExactly("authenticated");
      assertThat(rule.repositories()).extracting(RepositoryGlob::pattern).containsExactly("**");
    });
    RateLimitProperties limits = binder.bindOrCreate("registry-cache.rate-limit", Bindable.of(RateLimitProperties.class));
    assertThat(limits.enabled()).isTrue();
    assertThat(binder.bind("registry-cache.default-upstream", String.class).get()).isEqualTo("corp");
  }
}
