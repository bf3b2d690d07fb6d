package io.registrycache.api;

import io.registrycache.auth.AuthenticationRequired;
import io.registrycache.auth.Identity;
import io.registrycache.auth.PullAuthentication;
import io.registrycache.metrics.CacheMetrics;
import io.registrycache.oci.OciErrorCode;
import io.registrycache.oci.OciException;
import io.registrycache.proxy.FillPermits;
import io.registrycache.ratelimit.RateLimited;
import io.registrycache.ratelimit.RateLimits;
import java.net.URI;
import java.util.List;
import java.util.function.Supplier;
import org.springframework.stereotype.Component;
import reactor.core.publisher.Mono;

/**
 * What every {@code /v2} request passes before its handler, whichever server layer took it (the
 * pull route on Reactor Netty, {@link PullRoute}, or WebFlux's routes, {@link RegistryRoutes}):
 * with {@code registry-cache.auth.enabled}, who is asking ({@link PullAuthentication}); with {@code
 * registry-cache.rate-limit.enabled}, whether that identity may ask now ({@link RateLimits#admit})
 * and how many fills it may start ({@link FillPermits}). With both off, {@link #enter} is one
 * constant answer.
 */
@Component
public class PullGate {

  /**
   * Who asks, and the fills they may start.
   *
   * @param identity {@link Identity#ANONYMOUS} when authentication is off or no credentials came
   * @param permits the identity's fill permits for the request's Reactor context, or {@code null}
   *     (no limit)
   */
  public record Entry(Identity identity, FillPermits permits) {}

  private static final Mono<Entry> OPEN = Mono.just(new Entry(Identity.ANONYMOUS, null));

  private final PullAuthentication authentication;
  private final RateLimits limits;
  private final CacheMetrics metrics;

  /** {@code registry-cache.auth.enabled}, read once: off, no request enters the auth classes. */
  private final boolean authenticating;

  /** {@code registry-cache.rate-limit.enabled}, read once. */
  private final boolean limiting;

  public PullGate(PullAuthentication authentication, RateLimits limits, CacheMetrics metrics) {
    this.authentication = authentication;
    this.limits = limits;
    this.metrics = metrics;
    this.authenticating = authentication.enabled();
    this.limiting = limits.enabled();
  }

  /**
   * Lets a request in.
   *
   * @param authorization the request's {@code Authorization} values (empty when none)
   * @param requestUri the request's absolute URI (for a {@code Bearer} challenge's realm); asked
   *     for only with authentication on
   * @param clientAddress the client's IP address as text, or {@code null} when unknown
   * @param base whether this is {@code /v2/} itself: an anonymous request there is challenged when
   *     authentication is on (how Docker clients learn the challenge), and it takes no token of the
   *     rate limits
   * @return the entry; errors with {@link AuthenticationRequired} (401 {@code UNAUTHORIZED} with
   *     the challenge), 429 {@code TOOMANYREQUESTS} for a client over its failed credential checks
   *     or an identity over its requests per second ({@link RateLimited}, {@code Retry-After})
   */
  public Mono<Entry> enter(
      List<String> authorization, Supplier<URI> requestUri, String clientAddress, boolean base) {
    if (!authenticating) {
      return limiting && !base
          ? Mono.fromCallable(() -> admit(Identity.ANONYMOUS, clientAddress))
          : OPEN;
    }
    return authentication
        .authenticateRequest(authorization, requestUri, clientAddress)
        .doOnError(
            e ->
                e instanceof OciException oci
                    && oci.code() == OciErrorCode.TOOMANYREQUESTS
                    && !(e instanceof RateLimited),
            e -> limits.failedChecksRefused())
        .map(
            identity -> {
              if (base && identity.anonymous()) {
                throw new AuthenticationRequired(
                    authentication.challenge(requestUri.get(), null), "authentication required");
              }
              metrics.identityRequest(identity.metricLabel());
              return limiting && !base ? admit(identity, clientAddress) : new Entry(identity, null);
            });
  }

  /** Whether requests are authenticated ({@code registry-cache.auth.enabled}). */
  public boolean authenticating() {
    return authenticating;
  }

  private Entry admit(Identity identity, String clientAddress) {
    return new Entry(identity, limits.admit(identity, clientAddress));
  }
}
