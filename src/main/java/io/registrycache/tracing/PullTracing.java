package io.registrycache.tracing;

import io.micrometer.tracing.Span;
import io.micrometer.tracing.Tracer;
import io.micrometer.tracing.propagation.Propagator;
import java.util.function.Function;
import org.springframework.beans.factory.ObjectProvider;
import org.springframework.beans.factory.annotation.Autowired;
import org.springframework.beans.factory.annotation.Value;
import org.springframework.stereotype.Component;

/**
 * Where pull spans start (docs/tracing.md): the pull route's span of each request ({@link #start}),
 * and the owner replica's span of a peer request, continued from the asking replica's W3C {@code
 * traceparent} header ({@link #continueFrom}). Built on Micrometer Tracing's {@link Tracer} (Spring
 * Boot's OpenTelemetry bridge, exported with OTLP).
 *
 * <p>Off by default ({@code management.tracing.export.enabled=false} in {@code
 * application.properties}): {@link #enabled()} is then a constant {@code false}, the route starts
 * nothing and puts nothing in a request's context, so the warm path does not pay for it. On, each
 * request's root span is sampled with {@code management.tracing.sampling.probability}; a peer
 * request follows the sampling decision of the replica that asked.
 */
@Component
public class PullTracing {

  private static final PullTracing OFF = new PullTracing(null, null);

  private final Tracer tracer;
  private final Propagator propagator;

  /**
   * @param enabled {@code management.tracing.export.enabled} (this service's default: {@code
   *     false})
   */
  @Autowired
  public PullTracing(
      ObjectProvider<Tracer> tracer,
      ObjectProvider<Propagator> propagator,
      @Value("${management.tracing.export.enabled:false}") boolean enabled) {
    Tracer t = enabled ? tracer.getIfAvailable() : null;
    Propagator p = enabled ? propagator.getIfAvailable() : null;
    boolean on = t != null && !Tracer.NOOP.equals(t) && p != null;
    this.tracer = on ? t : null;
    this.propagator = on ? p : null;
  }

  /** On, with {@code tracer} and {@code propagator} (tests). */
  PullTracing(Tracer tracer, Propagator propagator) {
    this.tracer = tracer;
    this.propagator = propagator;
  }

  /** Tracing off: for services built without Spring (tests, tools). */
  public static PullTracing off() {
    return OFF;
  }

  /** Whether spans are made at all. */
  public boolean enabled() {
    return tracer != null;
  }

  /**
   * A new root span {@code name} (a new trace; sampled or not as the sampler decides).
   *
   * @return the started span, or {@code null} when tracing is off
   */
  public PullSpan start(String name) {
    if (tracer == null) {
      return null;
    }
    Span span = tracer.spanBuilder().setNoParent().name(name).kind(Span.Kind.SERVER).start();
    return new PullSpan(tracer, propagator, span);
  }

  /**
   * A server span {@code name} continuing the trace whose context {@code header} gives (W3C {@code
   * traceparent}); a new trace when the request carries none.
   *
   * @param header a request header's first value by name, {@code null} when absent
   * @return the started span, or {@code null} when tracing is off
   */
  public PullSpan continueFrom(String name, Function<String, String> header) {
    if (tracer == null) {
      return null;
    }
    Span span =
        propagator.extract(header, Function::apply).name(name).kind(Span.Kind.SERVER).start();
    return new PullSpan(tracer, propagator, span);
  }
}
