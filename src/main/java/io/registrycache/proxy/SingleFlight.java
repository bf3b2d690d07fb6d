package io.registrycache.proxy;

import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.function.Supplier;
import reactor.core.publisher.Mono;

/**
 * Collapses concurrent calls with the same key into one: the first caller's {@code Mono} runs,
 * every caller that arrives before it ends shares its result. The shared work is not cancelled
 * when a caller goes away.
 *
 * @param <K> key type
 * @param <V> result type
 */
final class SingleFlight<K, V> {

  private final Map<K, Mono<V>> inFlight = new ConcurrentHashMap<>();

  /** The shared result for {@code key}, starting {@code work} if nothing is in flight for it. */
  Mono<V> run(K key, Supplier<Mono<V>> work) {
    return Mono.defer(
        () ->
            inFlight.computeIfAbsent(
                key, k -> work.get().doFinally(signal -> inFlight.remove(k)).cache()));
  }

  /** Number of calls in flight. */
  int size() {
    return inFlight.size();
  }
}
