package io.registrycache.auth;

import com.github.benmanes.caffeine.cache.Cache;
import com.github.benmanes.caffeine.cache.Caffeine;
import java.time.Clock;
import java.time.Duration;
import java.time.Instant;

/**
 * The one cache of bearer-token verdicts, for the cache's own tokens ({@link TokenService}) and
 * those of trusted issuers ({@link ExternalTokens}) alike: a client sends the same token with every
 * request, and parsing and checking a JWT's signature per request would cost more than a warm pull.
 * Only tokens that verified are kept, with the time they are valid (clock skew included), checked
 * on every use; an entry is kept {@link #REMEMBER} at most, so a key removed from an issuer's JWK
 * set stops counting within that time.
 */
final class TokenVerdicts {

  /** How long a verdict is kept at most. */
  static final Duration REMEMBER = Duration.ofMinutes(5);

  /**
   * A token that verified.
   *
   * @param identity who it stands for
   * @param jwtId its {@code jti}, or {@code null}
   * @param validFrom {@code nbf} less the skew ({@link Instant#MIN} without {@code nbf})
   * @param validUntil {@code exp} plus the skew
   */
  record Verdict(Identity identity, String jwtId, Instant validFrom, Instant validUntil) {}

  private final Cache<String, Verdict> verdicts =
      Caffeine.newBuilder().expireAfterWrite(REMEMBER).maximumSize(10_000).build();
  private final Clock clock;

  TokenVerdicts(Clock clock) {
    this.clock = clock;
  }

  /**
   * The verdict of {@code token} when it verified lately and is still valid now, else {@code null}.
   */
  Verdict remembered(String token) {
    Verdict known = verdicts.getIfPresent(token);
    if (known == null) {
      return null;
    }
    Instant now = clock.instant();
    return now.isAfter(known.validFrom()) && now.isBefore(known.validUntil()) ? known : null;
  }

  void remember(String token, Verdict verdict) {
    verdicts.put(token, verdict);
  }
}
