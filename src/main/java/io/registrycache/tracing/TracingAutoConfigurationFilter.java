package io.registrycache.tracing;

import org.springframework.boot.autoconfigure.AutoConfigurationImportFilter;
import org.springframework.boot.autoconfigure.AutoConfigurationMetadata;
import org.springframework.context.EnvironmentAware;
import org.springframework.core.Ordered;
import org.springframework.core.annotation.Order;
import org.springframework.core.env.Environment;

/**
 * Leaves Spring Boot's OpenTelemetry and Micrometer Tracing auto-configurations out of the context
 * while {@code management.tracing.export.enabled} is {@code false} (this service's default, in
 * {@code application.properties}): with tracing off, no OpenTelemetry SDK, tracer, propagator or
 * span exporter is made, and none of their classes (about 250) is loaded.
 *
 * <p>An {@link AutoConfigurationImportFilter} (registered in {@code META-INF/spring.factories}) is
 * Spring Boot's own hook for dropping auto-configurations before their classes are read; unlike
 * {@code spring.autoconfigure.exclude}, it decides from the environment at every start, so tracing
 * stays switchable at run time ({@code MANAGEMENT_TRACING_EXPORT_ENABLED=true}, as docs/tracing.md
 * says). Unset, the setting is {@code true}, as in Spring Boot. First among the filters, so that
 * Spring Boot's class conditions do not load the tracing classes they name.
 */
@Order(Ordered.HIGHEST_PRECEDENCE)
public final class TracingAutoConfigurationFilter
    implements AutoConfigurationImportFilter, EnvironmentAware {

  /** Spring Boot's switch for exporting traces; this service's switch for tracing as a whole. */
  static final String ENABLED = "management.tracing.export.enabled";

  /** Packages of the auto-configurations that make the tracer and the OpenTelemetry SDK. */
  private static final String[] TRACING_PACKAGES = {
    "org.springframework.boot.opentelemetry.autoconfigure.",
    "org.springframework.boot.micrometer.tracing.",
  };

  private Environment environment;

  @Override
  public void setEnvironment(Environment environment) {
    this.environment = environment;
  }

  @Override
  public boolean[] match(String[] autoConfigurationClasses, AutoConfigurationMetadata metadata) {
    boolean on = environment == null || environment.getProperty(ENABLED, Boolean.class, true);
    boolean[] matches = new boolean[autoConfigurationClasses.length];
    for (int i = 0; i < autoConfigurationClasses.length; i++) {
      matches[i] = on || !isTracing(autoConfigurationClasses[i]);
    }
    return matches;
  }

  /**
   * Whether {@code autoConfiguration} (a class name, or null for a slot already filtered out)
   * belongs to tracing.
   */
  static boolean isTracing(String autoConfiguration) {
    if (autoConfiguration == null) {
      return false;
    }
    for (String prefix : TRACING_PACKAGES) {
      if (autoConfiguration.startsWith(prefix)) {
        return true;
      }
    }
    return false;
  }
}
