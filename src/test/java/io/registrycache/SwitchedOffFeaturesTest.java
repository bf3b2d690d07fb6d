package io.registrycache;

import static org.assertj.core.api.Assertions.assertThat;

import io.registrycache.testsupport.CacheProperties;
import io.registrycache.testsupport.TestFiles;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.Test;
import org.springframework.beans.factory.annotation.Autowired;
import org.springframework.boot.test.context.SpringBootTest;
import org.springframework.context.ConfigurableApplicationContext;
import org.springframework.test.context.DynamicPropertyRegistry;
import org.springframework.test.context.DynamicPropertySource;

/**
 * The default configuration (one replica, file-system store, tracing off) makes no bean of the
 * features it leaves off: no OpenTelemetry SDK, tracer or exporter, no cluster membership or peer
 * server, no S3 client. Each bean's type is checked by name, the whole context (auto-configured
 * beans included), so that a new bean of a switched-off feature fails here. How many of their
 * classes load is a benchmark figure (docs/performance.md), not a test.
 */
@SpringBootTest(
    classes = RegistryCacheApplication.class,
    webEnvironment = SpringBootTest.WebEnvironment.RANDOM_PORT)
class SwitchedOffFeaturesTest {

  static final Path storage = TestFiles.tempDirectory("registry-cache-switched-off-");

  /** Packages (of a bean's class) that belong to a feature the default configuration leaves off. */
  private static final List<String> OFF =
      List.of(
          "io.opentelemetry.",
          "io.micrometer.tracing.",
          "org.springframework.boot.opentelemetry.",
          "org.springframework.boot.micrometer.tracing.",
          "software.amazon.",
          "io.registrycache.cluster.",
          "io.registrycache.peer.",
          "io.registrycache.storage.s3.");

  /** The features' settings, bound and checked at every start whether the feature is on or not. */
  private static final List<String> SETTINGS =
      List.of(
          "io.registrycache.cluster.ClusterProperties",
          "io.registrycache.storage.s3.S3StorageProperties");

  @Autowired ConfigurableApplicationContext context;

  @DynamicPropertySource
  static void properties(DynamicPropertyRegistry registry) {
    CacheProperties.cache(storage).addTo(registry);
  }

  @Test
  void noBeanOfASwitchedOffFeature() {
    List<String> found = new ArrayList<>();
    for (String name : context.getBeanDefinitionNames()) {
      Class<?> type = context.getType(name, false);
      String typeName =
          type == null
              ? context.getBeanFactory().getBeanDefinition(name).getBeanClassName()
              : type.getName();
      if (typeName != null
          && OFF.stream().anyMatch(typeName::startsWith)
          && !SETTINGS.contains(typeName)) {
        found.add(name + " (" + typeName + ")");
      }
    }
    assertThat(context.getBeanDefinitionNames())
        .as("the context has beans at all")
        .hasSizeGreaterThan(50);
    assertThat(found).isEmpty();
  }

  @Test
  void theConfigurationClassesOfTracingAreNotImported() {
    List<String> tracing = new ArrayList<>();
    for (String name : context.getBeanDefinitionNames()) {
      if (name.startsWith("org.springframework.boot.opentelemetry.")
          || name.startsWith("org.springframework.boot.micrometer.tracing.")) {
        tracing.add(name);
      }
    }
    assertThat(tracing).isEmpty();
    // Spring Boot's observation support, which tracing would hang off, is still there.
    assertThat(context.getBeanNamesForType(io.micrometer.observation.ObservationRegistry.class))
        .isNotEmpty();
  }
}
