package io.registrycache.proxy;

import io.registrycache.metrics.CacheMetrics.Result;
import java.util.function.Function;
import reactor.core.publisher.Mono;

/**
 * How the cache answered one request (hit, miss, stale, error) and which upstream it concerned, for
 * the access log. The pull route records into its own holder; for the other requests a holder is
 * put in the Reactor context by the access log's web filter, and the proxy services record into it
 * as their results pass. Without a holder nothing is recorded. The first result recorded wins (a
 * blob HEAD that waits for its download is still a miss).
 */
public final class CacheOutcome {

  /** Reactor context key of the holder. */
  public static final Class<CacheOutcome> CONTEXT_KEY = CacheOutcome.class;

  private volatile Result result;
  private volatile String upstream;

  /** The result recorded, or {@code null}. */
  public Result result() {
    return result;
  }

  /** The upstream key recorded, or {@code null}. */
  public String upstream() {
    return upstream;
  }

  /** Records {@code r} for {@code upstreamKey}, unless a result was recorded already. */
  public synchronized void record(Result r, String upstreamKey) {
    if (result == null) {
      result = r;
    }
    if (upstream == null) {
      upstream = upstreamKey;
    }
  }

  /** Records into the context's holder, if any: the value's result on success, ERROR on error. */
  static <T> Function<Mono<T>, Mono<T>> track(String upstreamKey, Function<T, Result> resultOf) {
    return mono ->
        Mono.deferContextual(
            ctx -> {
              CacheOutcome holder = ctx.getOrDefault(CONTEXT_KEY, null);
              if (holder == null) {
                return mono;
              }
              return mono.doOnNext(v -> holder.record(resultOf.apply(v), upstreamKey))
                  .doOnError(e -> holder.record(Result.ERROR, upstreamKey));
            });
  }
}
