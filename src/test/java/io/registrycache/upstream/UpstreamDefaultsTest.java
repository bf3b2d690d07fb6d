package io.registrycache.upstream;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.registrycache.config.PropertiesConfiguration;
import io.registrycache.oci.OciException;
import java.util.Map;
import org.junit.jupiter.api.Test;
import org.springframework.boot.test.context.ConfigDataApplicationContextInitializer;
import org.springframework.boot.test.context.runner.ApplicationContextRunner;
import org.springframework.context.annotation.Configuration;
import org.springframework.context.annotation.Import;
import org.springframework.core.env.StandardEnvironment;
import org.springframework.core.env.SystemEnvironmentPropertySource;

/**
 * The embedded defaults ({@code application.properties}) add the built-in {@code local} upstream
 * only while the operator configures none (issue 7, point 12).
 */
class UpstreamDefaultsTest {

  @Configuration(proxyBeanMethods = false)
  @Import({PropertiesConfiguration.class, Upstreams.class})
  static class Defaults {}

  /** Reads application.properties like the application does. */
  private final ApplicationContextRunner runner =
      new ApplicationContextRunner()
          .withInitializer(new ConfigDataApplicationContextInitializer())
          .withUserConfiguration(Defaults.class);

  @Test
  void operatorsUpstreamReplacesTheBuiltInOne() {
    runner
        .withPropertyValues(
            "registry-cache.upstreams.mine.host=registry.example.test",
            "registry-cache.upstreams.mine.url=https://registry.example.test")
        .run(
            context -> {
              Upstreams upstreams = context.getBean(Upstreams.class);
              assertThat(upstreams.all()).extracting(Upstream::key).containsExactly("mine");
              assertThat(upstreams.byKey("local")).isEmpty();
              assertThatThrownBy(() -> upstreams.forHost("localhost:5000"))
                  .isInstanceOf(OciException.class)
                  .hasMessageContaining("not configured");
              assertThat(upstreams.defaultUpstream().key())
                  .as("the only upstream serves bare-form requests")
                  .isEqualTo("mine");
            });
  }

  @Test
  void withTwoOperatorUpstreamsAndNoDefaultBareFormIsRefused() {
    runner
        .withPropertyValues(
            "registry-cache.upstreams.a.url=https://a.example.test",
            "registry-cache.upstreams.b.url=https://b.example.test")
        .run(
            context -> {
              Upstreams upstreams = context.getBean(Upstreams.class);
              assertThat(upstreams.all())
                  .extracting(Upstream::key)
                  .containsExactlyInAnyOrder("a", "b");
              assertThatThrownBy(upstreams::defaultUpstream).isInstanceOf(OciException.class);
            });
  }

  @Test
  void withoutConfiguredUpstreamsTheBuiltInLocalOneServes() {
    runner.run(
        context -> {
          Upstreams upstreams = context.getBean(Upstreams.class);
          Upstream local = upstreams.defaultUpstream();
          assertThat(local.key()).isEqualTo("local");
          assertThat(local.url()).hasToString("http://localhost:5000");
          assertThat(upstreams.forHost("localhost:5000")).isSameAs(local);
        });
  }

  @Test
  void settingsUnderTheBuiltInKeyAmendIt() {
    runner
        .withPropertyValues("registry-cache.upstreams.local.aliases=upstream.test")
        .run(
            context -> {
              Upstreams upstreams = context.getBean(Upstreams.class);
              assertThat(upstreams.forHost("upstream.test").url())
                  .hasToString("http://localhost:5000");
              assertThat(upstreams.forHost("localhost:5000").key()).isEqualTo("local");
            });
  }

  /**
   * An upstream given only by environment variables, in the documented canonical form (the README's
   * two-upstream example, the Helm chart's ConfigMap, the perf stack, ContainerImageIT).
   */
  @Test
  void anUpstreamKeyFromEnvironmentVariablesIsFound() {
    runner
        // Spring maps environment-variable names only for the source named systemEnvironment.
        .withInitializer(
            context ->
                context
                    .getEnvironment()
                    .getPropertySources()
                    .replace(
                        StandardEnvironment.SYSTEM_ENVIRONMENT_PROPERTY_SOURCE_NAME,
                        new SystemEnvironmentPropertySource(
                            StandardEnvironment.SYSTEM_ENVIRONMENT_PROPERTY_SOURCE_NAME,
                            Map.<String, Object>of(
                                "REGISTRYCACHE_UPSTREAMS_CORP_URL", "https://registry.corp.test",
                                "REGISTRYCACHE_UPSTREAMS_CORP_PASSWORDFILE", "/run/secrets/corp"))))
        .run(
            context -> {
              Upstreams upstreams = context.getBean(Upstreams.class);
              assertThat(upstreams.all()).extracting(Upstream::key).containsExactly("corp");
              assertThat(upstreams.defaultUpstream().url())
                  .hasToString("https://registry.corp.test");
              assertThat(upstreams.defaultUpstream().settings().passwordFile()).isNotNull();
            });
  }
}
