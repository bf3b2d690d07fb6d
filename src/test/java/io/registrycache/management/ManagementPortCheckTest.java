package io.registrycache.management;

import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.registrycache.RegistryCacheApplication;
import io.registrycache.testsupport.CacheProperties;
import io.registrycache.testsupport.FreePorts;
import io.registrycache.testsupport.TestFiles;
import org.junit.jupiter.api.Test;
import org.springframework.boot.builder.SpringApplicationBuilder;

/**
 * The start-up checks that keep Spring Security off the registry port: the actuator on the registry
 * port (where nothing would guard it), and a {@code spring.autoconfigure.exclude} that drops the
 * security entries of {@code application.properties} (Spring Security's chain, firewall and a
 * generated password in front of {@code /v2}), each stop the start.
 */
class ManagementPortCheckTest {

  /**
   * Starts (and closes) the service with {@code properties} as name, value pairs over the test
   * defaults.
   */
  private static void start(Object... properties) {
    CacheProperties cache =
        CacheProperties.cache(TestFiles.tempDirectory("registry-cache-port-check-"))
            .set("server.port", "0")
            .set("registry-cache.admin.warm-up-pulls", "0");
    for (int i = 0; i < properties.length; i += 2) {
      cache.set((String) properties[i], String.valueOf(properties[i + 1]));
    }
    new SpringApplicationBuilder(RegistryCacheApplication.class)
        .run(cache.asArguments().toArray(String[]::new))
        .close();
  }

  @Test
  void theActuatorOnTheRegistryPortStopsTheStart() throws Exception {
    int port = FreePorts.take(1).get(0);
    assertThatThrownBy(() -> start("server.port", port, "management.server.port", port))
        .hasStackTraceContaining("management.server.port must be a port of its own");
  }

  @Test
  void anExcludeListWithoutTheSecurityEntriesStopsTheStart() {
    assertThatThrownBy(
            () ->
                start(
                    "spring.autoconfigure.exclude",
                    "org.springframework.boot.actuate.autoconfigure.endpoint.jackson.Jackson2EndpointAutoConfiguration"))
        .hasStackTraceContaining("Spring Security's web filter chain")
        .hasStackTraceContaining("spring.autoconfigure.exclude");
  }
}
