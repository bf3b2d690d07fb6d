package io.registrycache.tracing;

import static org.assertj.core.api.Assertions.assertThat;

import org.junit.jupiter.api.Test;
import org.springframework.mock.env.MockEnvironment;

class TracingAutoConfigurationFilterTest {

  private static final String[] CANDIDATES = {
    "org.springframework.boot.opentelemetry.autoconfigure.OpenTelemetrySdkAutoConfiguration",
    "org.springframework.boot.micrometer.tracing.autoconfigure.MicrometerTracingAutoConfiguration",
    "org.springframework.boot.micrometer.tracing.opentelemetry.autoconfigure.otlp.OtlpTracingAutoConfiguration",
    "org.springframework.boot.micrometer.observation.autoconfigure.ObservationAutoConfiguration",
    "org.springframework.boot.micrometer.metrics.autoconfigure.MetricsAutoConfiguration",
    null,
  };

  private static boolean[] match(MockEnvironment environment) {
    TracingAutoConfigurationFilter filter = new TracingAutoConfigurationFilter();
    filter.setEnvironment(environment);
    return filter.match(CANDIDATES, null);
  }

  @Test
  void tracingOffLeavesOutOpenTelemetryAndMicrometerTracingOnly() {
    boolean[] matches =
        match(new MockEnvironment().withProperty(TracingAutoConfigurationFilter.ENABLED, "false"));
    assertThat(matches).containsExactly(false, false, false, true, true, true);
  }

  @Test
  void tracingOnLeavesEverythingIn() {
    boolean[] matches =
        match(new MockEnvironment().withProperty(TracingAutoConfigurationFilter.ENABLED, "true"));
    assertThat(matches).containsOnly(true);
  }

  @Test
  void unsetIsOnAsInSpringBoot() {
    assertThat(match(new MockEnvironment())).containsOnly(true);
  }
}
