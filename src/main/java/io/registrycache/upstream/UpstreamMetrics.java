package io.registrycache.upstream;

import io.micrometer.core.instrument.Counter;
import io.micrometer.core.instrument.MeterRegistry;
import io.micrometer.core.instrument.Timer;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ConcurrentMap;
import org.springframework.core.io.buffer.DataBuffer;
import reactor.core.publisher.Flux;
import reactor.core.publisher.Mono;

/**
 * Upstream metrics: the timer {@code registry.cache.upstream.request} (tags {@code upstream},
 * {@code kind} = manifest|blob|tags|referrers|auth, {@code outcome} =
 * success|not_found|client_error|server_error|timeout|unreachable) and the counter {@code
 * registry.cache.upstream.fetched.bytes} (tag {@code upstream}; blob body bytes, counted as they
 * stream) and the counter {@code registry.cache.upstream.resumes} (tags {@code upstream}, {@code
 * outcome} = ranged|restarted: blob transfers resumed from the last byte received).
 */
final class UpstreamMetrics {

  static final String REQUEST_TIMER = "registry.cache.upstream.request";
  static final String FETCHED_BYTES = "registry.cache.upstream.fetched.bytes";
  static final String RESUMES = "registry.cache.upstream.resumes";

  private final MeterRegistry registry;

  /**
   * Meters by tag values, registered once: building and registering a meter per call is the cost.
   */
  private final ConcurrentMap<TimerKey, Timer> timers = new ConcurrentHashMap<>();

  private final ConcurrentMap<String, Counter> fetched = new ConcurrentHashMap<>();
  private final ConcurrentMap<String, Counter> resumes = new ConcurrentHashMap<>();

  private record TimerKey(String upstream, String kind, String outcome) {}

  UpstreamMetrics(MeterRegistry registry) {
    this.registry = registry;
  }

  /**
   * Times {@code call} from subscription to its result or error. A blob's time ends when the
   * response headers arrive (latency, not transfer time).
   */
  <T> Mono<T> time(Upstream upstream, String kind, Mono<T> call) {
    return Mono.defer(
        () -> {
          Timer.Sample sample = Timer.start(registry);
          return call.doOnSuccess(v -> stop(sample, upstream, kind, UpstreamErrors.SUCCESS))
              .doOnError(e -> stop(sample, upstream, kind, UpstreamErrors.outcome(e)));
        });
  }

  /**
   * Counts a blob transfer resumed after it broke off: {@code ranged} when the upstream sent only
   * the rest (206), else it sent the whole blob again (200) and the bytes already received were
   * skipped.
   */
  void resumed(Upstream upstream, boolean ranged) {
    String outcome = ranged ? "ranged" : "restarted";
    resumes
        .computeIfAbsent(
            upstream.key() + "|" + outcome,
            key ->
                Counter.builder(RESUMES)
                    .description("Blob transfers resumed after the upstream connection broke off")
                    .tag("upstream", upstream.key())
                    .tag("outcome", outcome)
                    .register(registry))
        .increment();
  }

  /** Counts the bytes of a blob body as they pass. */
  Flux<DataBuffer> countBytes(Upstream upstream, Flux<DataBuffer> body) {
    Counter counter =
        fetched.computeIfAbsent(
            upstream.key(),
            key ->
                Counter.builder(FETCHED_BYTES)
                    .description("Blob bytes received from the upstream")
                    .baseUnit("bytes")
                    .tag("upstream", key)
                    .register(registry));
    return body.doOnNext(buffer -> counter.increment(buffer.readableByteCount()));
  }

  private void stop(Timer.Sample sample, Upstream upstream, String kind, String outcome) {
    sample.stop(
        timers.computeIfAbsent(
            new TimerKey(upstream.key(), kind, outcome),
            key ->
                Timer.builder(REQUEST_TIMER)
                    .description("Requests to upstream registries")
                    .tag("upstream", key.upstream())
                    .tag("kind", key.kind())
                    .tag("outcome", key.outcome())
                    .register(registry)));
  }
}
