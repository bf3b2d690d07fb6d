package io.registrycache.upstream;

import static org.assertj.core.api.Assertions.assertThat;

import io.micrometer.core.instrument.MeterRegistry;
import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import io.registrycache.config.PropertiesConfiguration;
import io.registrycache.config.RegistryCacheProperties;
import java.time.Clock;
import java.time.Duration;
import java.util.Map;
import org.junit.jupiter.api.Test;
import org.springframework.boot.test.context.runner.ApplicationContextRunner;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Configuration;
import org.springframework.context.annotation.Import;
import org.springframework.core.env.SystemEnvironmentPropertySource;

/** The {@link UpstreamClient} bean as the rest of the application gets it. */
class UpstreamClientWiringTest {

  @Configuration(proxyBeanMethods = false)
  @Import({
    PropertiesConfiguration.class,
    Upstreams.class,
    UpstreamResilience.class,
    UpstreamsHealthIndicator.class,
    ReactorNettyUpstreamClient.class
  })
  static class Wiring {
    @Bean
    MeterRegistry meterRegistry() {
      return new SimpleMeterRegistry();
    }

    @Bean
    Clock clock() { // as RuntimeConfiguration provides it
      return Clock.systemUTC();
    }
  }

  private final ApplicationContextRunner runner =
      new ApplicationContextRunner()
          .withUserConfiguration(Wiring.class)
          .withPropertyValues(
              "registry-cache.default-upstream=local",
              "registry-cache.upstreams.local.url=http://localhost:5000");

  @Test
  void upstreamClientIsInjectable() {
    runner.run(context -> assertThat(context).hasSingleBean(UpstreamClient.class));
  }

  @Test
  void configuredUpstreamsAreInTheHealthFromTheStart() {
    runner
        .withPropertyValues(
            "registry-cache.upstreams.local.circuit-breaker.wait-in-open=7s",
            "registry-cache.upstreams.local.retry.max-attempts=5")
        .run(
            context -> {
              var health = context.getBean(UpstreamsHealthIndicator.class).health();
              assertThat(health.getStatus().getCode()).isEqualTo("UP");
              assertThat(health.getDetails()).containsKey("local");
              assertThat(
                      context
                          .getBean(RegistryCacheProperties.class)
                          .upstreams()
                          .upstreams()
                          .get("local")
                          .circuitBreaker()
                          .waitInOpen())
                  .isEqualTo(Duration.ofSeconds(7));
              assertThat(
                      context
                          .getBean(MeterRegistry.class)
                          .get(UpstreamResilience.CIRCUIT_STATE)
                          .tags("upstream", "local", "state", "closed")
                          .gauge()
                          .value())
                  .isEqualTo(1.0);
            });
  }

  @Test
  void badTlsFileFailsTheStartUpNamingTheSetting() {
    runner
        .withPropertyValues("registry-cache.upstreams.local.tls.ca-file=/nonexistent/ca.pem")
        .run(
            context ->
                assertThat(context)
                    .hasFailed()
                    .getFailure()
                    .hasStackTraceContaining("registry-cache.upstreams.local.tls.ca-file"));
  }

  @Test
  void passwordFromEnvironmentStyleProperty() {
    runner
        .withPropertyValues("registry-cache.upstreams.local.username=robot")
        .withInitializer(
            context ->
                context
                    .getEnvironment()
                    .getPropertySources()
                    .addFirst(
                        new SystemEnvironmentPropertySource(
                            "env", Map.of("REGISTRY_CACHE_UPSTREAMS_LOCAL_PASSWORD", "from-env"))))
        .run(
            context -> {
              assertThat(context).hasSingleBean(UpstreamClient.class);
              assertThat(
                      context
                          .getBean(RegistryCacheProperties.class)
                          .upstreams()
                          .upstreams()
                          .get("local")
                          .password())
                  .isEqualTo("from-env");
            });
  }

  @Test
  void usernameWithoutPasswordFailsTheStartUp() {
    runner
        .withPropertyValues("registry-cache.upstreams.local.username=robot")
        .run(
            context ->
                assertThat(context)
                    .hasFailed()
                    .getFailure()
                    .hasStackTraceContaining("username is set without password"));
  }
}
