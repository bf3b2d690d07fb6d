package io.registrycache.tracing;

import io.micrometer.tracing.Span;
import io.micrometer.tracing.Tracer;
import io.micrometer.tracing.propagation.Propagator;
import java.util.function.BiConsumer;
import java.util.function.Function;
import reactor.core.publisher.Mono;
import reactor.core.publisher.SignalType;
import reactor.util.context.Context;
import reactor.util.context.ContextView;

/**
 * One started span of a pull (the request's own, or one of its steps) and the means to start its
 * children. It travels in the request's Reactor context under {@link #CONTEXT_KEY} — never in a
 * {@code ThreadLocal}: a pull hops between Netty event loops and the storage scheduler — and is
 * passed by hand where work outlives the request that started it (a blob download shared by a
 * single-flight). There is none in the context when tracing is off ({@link PullTracing}), and every
 * helper here is then a pass-through.
 *
 * <p>Tags carry names, digests, sizes and statuses; never credentials, tokens or header values.
 */
public final class PullSpan {

  /** Reactor context key of the current {@link PullSpan}. */
  public static final String CONTEXT_KEY = "registry-cache.pull-span";

  private final Tracer tracer;
  private final Propagator propagator;
  private final Span span;

  PullSpan(Tracer tracer, Propagator propagator, Span span) {
    this.tracer = tracer;
    this.propagator = propagator;
    this.span = span;
  }

  /** The span in {@code context}, or {@code null} (tracing off, or work outside a pull). */
  public static PullSpan of(ContextView context) {
    return context.getOrDefault(CONTEXT_KEY, null);
  }

  /** Starts a child span named {@code name}; end it with {@link #end()}. */
  public PullSpan child(String name) {
    return new PullSpan(tracer, propagator, tracer.nextSpan(span).name(name).start());
  }

  /** Sets tag {@code key}; a {@code null} value is left out. */
  public PullSpan tag(String key, String value) {
    if (value != null) {
      span.tag(key, value);
    }
    return this;
  }

  /** Sets numeric tag {@code key}. */
  public PullSpan tag(String key, long value) {
    span.tag(key, value);
    return this;
  }

  /**
   * Marks the span failed with {@code error} (its class and message; messages never hold
   * credentials).
   */
  public PullSpan error(Throwable error) {
    span.error(error);
    return this;
  }

  /** Ends the span (idempotent in the OpenTelemetry SDK: a second end is ignored). */
  public void end() {
    span.end();
  }

  /**
   * Writes this span's W3C trace context ({@code traceparent}, and {@code tracestate} when set) as
   * headers.
   */
  public void inject(BiConsumer<String, String> header) {
    propagator.inject(span.context(), header, BiConsumer::accept);
  }

  /** {@code context} with this span as the current one. */
  public Context into(Context context) {
    return context.put(CONTEXT_KEY, this);
  }

  /**
   * {@code mono} inside a child span {@code name} of the context's span, ended when {@code mono}
   * ends (success, error or cancel); {@code mono} itself when the context holds no span.
   *
   * @param tagKey a tag to set, or {@code null}
   */
  public static <T> Mono<T> around(String name, String tagKey, String tagValue, Mono<T> mono) {
    return Mono.deferContextual(
        context -> {
          PullSpan parent = of(context);
          if (parent == null) {
            return mono;
          }
          PullSpan step = parent.child(name);
          if (tagKey != null) {
            step.tag(tagKey, tagValue);
          }
          return ended(step, mono);
        });
  }

  /**
   * As {@link #around}, for work that needs its span (to send its trace context on, as a peer
   * request does): {@code build} gets the child span, or {@code null} when the context holds none.
   *
   * @param tags tag keys and values, alternating
   */
  public static <T> Mono<T> aroundWith(
      String name, Function<PullSpan, Mono<T>> build, String... tags) {
    return Mono.deferContextual(
        context -> {
          PullSpan parent = of(context);
          if (parent == null) {
            return build.apply(null);
          }
          PullSpan step = parent.child(name);
          for (int i = 0; i + 1 < tags.length; i += 2) {
            step.tag(tags[i], tags[i + 1]);
          }
          return ended(step, build.apply(step));
        });
  }

  private static <T> Mono<T> ended(PullSpan step, Mono<T> mono) {
    return mono.doOnError(step::error)
        .doFinally(
            signal -> {
              if (signal == SignalType.CANCEL) {
                step.tag("registry.cancelled", "true");
              }
              step.end();
            })
        .contextWrite(step::into);
  }
}
