package io.registrycache.tracing;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.micrometer.tracing.Tracer;
import io.micrometer.tracing.otel.bridge.OtelCurrentTraceContext;
import io.micrometer.tracing.otel.bridge.OtelPropagator;
import io.micrometer.tracing.otel.bridge.OtelTracer;
import io.micrometer.tracing.propagation.Propagator;
import io.opentelemetry.api.trace.StatusCode;
import io.opentelemetry.api.trace.propagation.W3CTraceContextPropagator;
import io.opentelemetry.context.propagation.ContextPropagators;
import io.opentelemetry.sdk.testing.exporter.InMemorySpanExporter;
import io.opentelemetry.sdk.trace.SdkTracerProvider;
import io.opentelemetry.sdk.trace.data.SpanData;
import io.opentelemetry.sdk.trace.export.SimpleSpanProcessor;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.springframework.beans.factory.support.StaticListableBeanFactory;
import reactor.core.publisher.Mono;

/**
 * {@link PullTracing} and {@link PullSpan} on the real OpenTelemetry SDK through Micrometer's
 * bridge.
 */
class PullTracingTest {

  private final InMemorySpanExporter exported = InMemorySpanExporter.create();
  private final SdkTracerProvider provider =
      SdkTracerProvider.builder().addSpanProcessor(SimpleSpanProcessor.create(exported)).build();

  @AfterEach
  void close() {
    provider.close();
  }

  private PullTracing replica(String name) {
    io.opentelemetry.api.trace.Tracer otel = provider.get(name);
    OtelTracer tracer = new OtelTracer(otel, new OtelCurrentTraceContext(), event -> {});
    return new PullTracing(
        tracer,
        new OtelPropagator(
            ContextPropagators.create(W3CTraceContextPropagator.getInstance()), otel));
  }

  private SpanData span(String name) {
    return exported.getFinishedSpanItems().stream()
        .filter(s -> s.getName().equals(name))
        .findFirst()
        .orElseThrow(
            () -> new AssertionError("no span " + name + " in " + exported.getFinishedSpanItems()));
  }

  @Test
  void offByDefaultItStartsNothingAndStepsPassThrough() {
    StaticListableBeanFactory beans = new StaticListableBeanFactory();
    OtelTracer tracer =
        new OtelTracer(provider.get("x"), new OtelCurrentTraceContext(), event -> {});
    beans.addBean("tracer", tracer);
    beans.addBean("propagator", Propagator.NOOP);
    PullTracing off =
        new PullTracing(
            beans.getBeanProvider(Tracer.class), beans.getBeanProvider(Propagator.class), false);
    assertThat(off.enabled()).isFalse();
    assertThat(off.start("pull blob")).isNull();
    assertThat(off.continueFrom("peer serve blob", header -> null)).isNull();
    assertThat(PullTracing.off().enabled()).isFalse();
    assertThat(PullSpan.around("upstream blob", "k", "v", Mono.just(42)).block()).isEqualTo(42);
    assertThat(exported.getFinishedSpanItems()).isEmpty();

    PullTracing on =
        new PullTracing(
            beans.getBeanProvider(Tracer.class), beans.getBeanProvider(Propagator.class), true);
    assertThat(on.enabled()).isTrue();
  }

  @Test
  void aStepIsAChildOfTheSpanInTheContextAndEndsWithItsMono() {
    PullSpan pull = replica("a").start("pull blob").tag("registry.kind", "blob");
    assertThat(
            PullSpan.around(
                    "upstream blob",
                    "registry.upstream",
                    "local",
                    PullSpan.around("upstream token", null, null, Mono.just("bytes")))
                .contextWrite(pull::into)
                .block())
        .isEqualTo("bytes");
    assertThatThrownBy(
            () ->
                PullSpan.around(
                        "upstream manifest",
                        null,
                        null,
                        Mono.error(new IllegalStateException("503")))
                    .contextWrite(pull::into)
                    .block())
        .hasMessage("503");
    pull.end();

    SpanData root = span("pull blob");
    SpanData blob = span("upstream blob");
    SpanData token = span("upstream token");
    assertThat(root.getParentSpanContext().isValid()).isFalse();
    assertThat(blob.getParentSpanId()).isEqualTo(root.getSpanId());
    assertThat(token.getParentSpanId()).as("nested steps nest").isEqualTo(blob.getSpanId());
    assertThat(blob.getAttributes().asMap().toString()).contains("registry.upstream=local");
    assertThat(span("upstream manifest").getStatus().getStatusCode()).isEqualTo(StatusCode.ERROR);
    assertThat(List.of(root, blob, token)).allMatch(s -> s.getTraceId().equals(root.getTraceId()));
  }

  @Test
  void theOwnerContinuesTheTraceFromTheHeadersThePeerHopSends() {
    PullSpan pull = replica("a").start("pull blob");
    Map<String, String> headers = new HashMap<>();
    PullSpan hop = pull.child("peer fetch");
    hop.inject(headers::put);
    assertThat(headers).containsKey("traceparent").doesNotContainKey("authorization");

    PullSpan served = replica("b").continueFrom("peer serve blob", headers::get);
    served.end();
    hop.end();
    pull.end();

    assertThat(span("peer serve blob").getTraceId()).isEqualTo(span("pull blob").getTraceId());
    assertThat(span("peer serve blob").getParentSpanId()).isEqualTo(span("peer fetch").getSpanId());
    assertThat(replica("b").continueFrom("peer serve blob", header -> null))
        .as("no traceparent: a new trace")
        .isNotNull();
  }
}
