package io.registrycache.proxy;

import io.registrycache.oci.OciException;
import reactor.util.context.ContextView;

/**
 * How many upstream fills the requests of one identity may have running at once ({@code
 * registry-cache.rate-limit.*.concurrent-fills}), carried in the Reactor context of a client's
 * request under {@link #CONTEXT_KEY}. A fill is a manifest fetch or a blob download a request is
 * about to start: the proxy services ask for a permit only then, under the single-flight's lock, so
 * a request served from the cache, or one that joins a fill running already, takes none. The permit
 * is given back when the fill ends (stored, failed or cut off), not when the client goes away: the
 * upstream transfer goes on without it. Without a holder in the context (peers' requests, preload,
 * prefetch on manifest, limits off) nothing is limited.
 */
public interface FillPermits {

  /** Reactor context key of a request's permits. */
  Class<FillPermits> CONTEXT_KEY = FillPermits.class;

  /** Takes a permit for one fill about to start; false when the limit is reached. Never blocks. */
  boolean tryAcquire();

  /** Gives back a permit {@link #tryAcquire} gave: once per permit. */
  void release();

  /** The error for a fill refused: 429 {@code TOOMANYREQUESTS} with {@code Retry-After}. */
  OciException refused();

  /** The permits in {@code context}, or {@code null}. */
  static FillPermits of(ContextView context) {
    return context.getOrDefault(CONTEXT_KEY, null);
  }
}
