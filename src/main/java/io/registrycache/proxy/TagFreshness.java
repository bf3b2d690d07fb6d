package io.registrycache.proxy;

import io.registrycache.storage.TagRef;
import io.registrycache.upstream.UpstreamException;
import java.time.Clock;
import java.time.Duration;
import java.time.Instant;

/**
 * Whether a cached tag is served as it is, revalidated with the upstream, or served stale — the one
 * place that decides, by the injected clock ({@code manifests.tag-ttl}, {@code offline}). The
 * stores only keep the time it gives them ({@link #confirmedNow}); a digest is content-addressed
 * and never revalidated.
 */
final class TagFreshness {

  /** What to do with a cached tag. */
  enum Verdict {
    /** Younger than the TTL, or the cache is offline: served as it is. */
    FRESH,
    /** Older: asked again of the upstream (a {@code HEAD}, or the owner replica's manifest). */
    REVALIDATE
  }

  private final Duration ttl;
  private final Clock clock;
  private final boolean offline;

  /**
   * @param ttl how long a tag confirmed by the upstream is served without asking again
   * @param clock the service's clock
   * @param offline whether the upstream is never asked ({@code registry-cache.offline})
   */
  TagFreshness(Duration ttl, Clock clock, boolean offline) {
    this.ttl = ttl;
    this.clock = clock;
    this.offline = offline;
  }

  /** The verdict on {@code link} now. */
  Verdict of(TagRef link) {
    return offline || Duration.between(link.validatedAt(), clock.instant()).compareTo(ttl) < 0
        ? Verdict.FRESH
        : Verdict.REVALIDATE;
  }

  /** The time to record for a tag the upstream confirmed, or pointed elsewhere, just now. */
  Instant confirmedNow() {
    return clock.instant();
  }

  /**
   * Whether a revalidation that failed with {@code e} serves the cached tag stale: the upstream was
   * unreachable, failing or rate-limiting — not when it said the tag is gone ({@code
   * MANIFEST_UNKNOWN}) or refused the cache's credentials.
   */
  static boolean servesStale(UpstreamException e) {
    return e.isUnavailable();
  }
}
