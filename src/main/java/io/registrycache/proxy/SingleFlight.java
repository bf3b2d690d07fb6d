package io.registrycache.proxy;

import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicReference;
import java.util.function.Consumer;
import java.util.function.Function;
import java.util.function.Predicate;
import java.util.function.Supplier;
import reactor.core.publisher.Mono;

/**
 * The one single-flight of the pull path, for manifest fetches and blob downloads alike: callers
 * with the same key while a call is in flight share it, so any number of concurrent cold pulls make
 * one upstream request. The shared call is not cancelled when a caller goes away.
 *
 * @param <K> key type
 * @param <V> the shared call: a {@code Mono} ({@link #shared}) or a {@link BlobDownload}
 */
final class SingleFlight<K, V> {

  private final Map<K, V> inFlight = new ConcurrentHashMap<>();

  /**
   * The call in flight for {@code key}, or a new one: made by {@code create} (under the map's lock:
   * no side effects beyond the object) and then started by {@code start} (outside it), exactly
   * once. The call must end with {@link #finished}. When {@code create} returns null (nothing to do
   * after all), so does this, and nothing is started.
   */
  @SuppressWarnings("ReferenceEquality") // whether this caller made the call: identity is the test
  V join(K key, Function<K, V> create, Consumer<V> start) {
    AtomicReference<V> created = new AtomicReference<>();
    V call =
        inFlight.computeIfAbsent(
            key,
            k -> {
              V v = create.apply(k);
              created.set(v);
              return v;
            });
    if (call != null && call == created.get()) {
      start.accept(call);
    }
    return call;
  }

  /** A call in flight whose key {@code matching} accepts, or null; scans every call in flight. */
  V current(Predicate<K> matching) {
    for (Map.Entry<K, V> e : inFlight.entrySet()) {
      if (matching.test(e.getKey())) {
        return e.getValue();
      }
    }
    return null;
  }

  /** Ends {@code call}: the next caller for {@code key} starts a new one. */
  void finished(K key, V call) {
    inFlight.remove(key, call);
  }

  /** Number of calls in flight. */
  int size() {
    return inFlight.size();
  }

  /** The calls in flight now (a copy). */
  List<V> inFlight() {
    return List.copyOf(inFlight.values());
  }

  /**
   * The shared result for {@code key}, running {@code work} if nothing is in flight for it; the
   * call ends when {@code work}'s {@code Mono} does.
   */
  static <K, T> Mono<T> shared(SingleFlight<K, Mono<T>> flights, K key, Supplier<Mono<T>> work) {
    return shared(flights, key, Optional::empty, work);
  }

  /**
   * As {@link #shared(SingleFlight, Object, Supplier)}, for a caller that looked for the result
   * before and found nothing: {@code storedMeanwhile} looks again (in memory, under the map's lock)
   * before a new call is made, and its result is the answer when present. A call that stores its
   * result before it ends cannot then slip between that caller's look and its join, which would
   * make a second upstream request for the same content.
   */
  static <K, T> Mono<T> shared(
      SingleFlight<K, Mono<T>> flights,
      K key,
      Supplier<Optional<T>> storedMeanwhile,
      Supplier<Mono<T>> work) {
    return shared(flights, key, storedMeanwhile, null, work);
  }

  /**
   * As {@link #shared(SingleFlight, Object, Supplier, Supplier)}, with a new call started only when
   * {@code permits} gives a permit (taken under the map's lock; given back when the call ends); a
   * caller that joins a call in flight, or finds the result stored, takes none.
   *
   * @param permits the caller's fill permits, or {@code null} for no limit
   * @return errors with {@link FillPermits#refused()} when a new call was needed and refused
   */
  static <K, T> Mono<T> shared(
      SingleFlight<K, Mono<T>> flights,
      K key,
      Supplier<Optional<T>> storedMeanwhile,
      FillPermits permits,
      Supplier<Mono<T>> work) {
    return Mono.defer(
        () -> {
          AtomicReference<Mono<T>> self = new AtomicReference<>();
          AtomicReference<T> stored = new AtomicReference<>();
          boolean[] refused = {false};
          Mono<T> joined =
              flights.join(
                  key,
                  k -> {
                    Optional<T> done = storedMeanwhile.get();
                    if (done.isPresent()) {
                      stored.set(done.get());
                      return null;
                    }
                    if (permits != null && !permits.tryAcquire()) {
                      refused[0] = true;
                      return null;
                    }
                    // Ended before the result reaches anyone: a caller that has it and asks again
                    // starts a new call (a revalidation must not join the one it just saw end).
                    Mono<T> call =
                        Mono.defer(work)
                            .doOnSuccess(v -> flights.finished(k, self.get()))
                            .doOnError(e -> flights.finished(k, self.get()))
                            .doFinally(
                                signal -> {
                                  flights.finished(k, self.get());
                                  if (permits != null) {
                                    permits.release();
                                  }
                                })
                            .cache();
                    self.set(call);
                    return call;
                  },
                  call -> {});
          if (refused[0]) {
            return Mono.error(permits.refused());
          }
          return joined != null ? joined : Mono.just(stored.get());
        });
  }
}
