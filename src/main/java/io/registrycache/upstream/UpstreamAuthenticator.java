package io.registrycache.upstream;

import com.github.benmanes.caffeine.cache.AsyncCache;
import com.github.benmanes.caffeine.cache.Caffeine;
import com.github.benmanes.caffeine.cache.Expiry;
import com.github.benmanes.caffeine.cache.Ticker;
import com.google.cloud.tools.jib.api.Credential;
import io.registrycache.oci.RepositoryName;
import io.registrycache.tracing.PullSpan;
import java.time.Duration;
import java.util.Map;
import java.util.Optional;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import reactor.core.publisher.Mono;
import reactor.core.scheduler.Scheduler;

/**
 * Registry authentication: on a {@code 401} with a {@code WWW-Authenticate} challenge (RFC 9110
 * section 11.6.1), a {@code Basic} challenge gets the upstream's credential as basic credentials
 * (RFC 7617); a {@code Bearer} challenge gets a token from the {@link TokenProvider}.
 *
 * <p>The resulting {@link UpstreamAuthorization} is cached per (upstream, repository) — for a
 * pass-through upstream per (upstream, repository, client credentials' {@link
 * ClientCredential#id()}), never shared between clients — and used for manifests, blobs and tags
 * alike, until its own {@link UpstreamAuthorization#reuseFor()} (the token's {@code expires_in}
 * less a margin) ends. Loading is single-flight: concurrent requests for one key share one token
 * request. The credential lookup blocks (files, credential helpers), so it runs on a dedicated
 * bounded scheduler. The last challenge of each upstream is remembered so that a repository seen
 * for the first time gets its token before its first request.
 *
 * <p>Never log an authorization's header or a jib {@code Credential}: its {@code toString()} prints
 * the secret.
 */
final class UpstreamAuthenticator {

  /**
   * Key of a cached authorization. {@code client} is the {@link ClientCredential#id()} of the
   * client credentials for a pass-through upstream (so a token got with one client's credentials is
   * never sent for another), empty otherwise.
   */
  record Key(String upstreamKey, String repository, String client) {
    static Key of(Upstream upstream, RepositoryName repository) {
      return new Key(
          upstream.key(),
          repository.value(),
          upstream.passthrough() ? upstream.clientCredential().id() : "");
    }
  }

  /**
   * Outcome of one token load. Failures are values, not failed futures: Caffeine logs every failed
   * asynchronous load as a warning with its stack trace, and a wrong password is not a reason for
   * that. A failed outcome is removed from the cache at once.
   */
  private record Outcome(UpstreamAuthorization authorization, Throwable failure) {}

  private final AsyncCache<Key, Outcome> authorizations;
  private final Map<String, String> challenges = new ConcurrentHashMap<>();
  private final Scheduler blocking;
  private final TokenProvider tokens;
  private final UpstreamMetrics metrics;

  /**
   * @param ticker the time source of {@link UpstreamAuthorization#reuseFor()}
   */
  UpstreamAuthenticator(
      Scheduler blocking, TokenProvider tokens, UpstreamMetrics metrics, Ticker ticker) {
    this.blocking = blocking;
    this.tokens = tokens;
    this.metrics = metrics;
    this.authorizations =
        Caffeine.newBuilder()
            .expireAfter(
                Expiry.<Key, Outcome>creating(
                    (key, outcome) ->
                        outcome.failure() != null
                            ? Duration.ZERO
                            : outcome.authorization().reuseFor()))
            .maximumSize(10_000)
            .ticker(ticker)
            .buildAsync();
  }

  /**
   * The authorization to send first: a cached one, a fresh one when the upstream's challenge is
   * already known, or none (try anonymously, a 401 tells what is needed).
   */
  Mono<Optional<UpstreamAuthorization>> current(Upstream upstream, RepositoryName repository) {
    Key key = Key.of(upstream, repository);
    CompletableFuture<Outcome> cached = authorizations.getIfPresent(key);
    if (cached != null) {
      return unwrap(cached).map(Optional::of);
    }
    String challenge = challenges.get(upstream.key());
    if (challenge == null) {
      return Mono.just(Optional.empty());
    }
    return load(upstream, repository, key, challenge).map(Optional::of);
  }

  /**
   * Answers a challenge: a new authorization for {@code repository}, shared with concurrent
   * callers. {@code rejected} (what the upstream just refused, or {@code null}) is dropped from the
   * cache first, but only if no one replaced it yet, so a burst of 401s costs one token.
   */
  Mono<UpstreamAuthorization> answer(
      Upstream upstream,
      RepositoryName repository,
      String challenge,
      UpstreamAuthorization rejected) {
    challenges.put(upstream.key(), challenge);
    Key key = Key.of(upstream, repository);
    forget(key, rejected);
    return load(upstream, repository, key, challenge);
  }

  /** Drops {@code rejected} from the cache unless it was replaced meanwhile. */
  void forget(Upstream upstream, RepositoryName repository, UpstreamAuthorization rejected) {
    forget(Key.of(upstream, repository), rejected);
  }

  private void forget(Key key, UpstreamAuthorization rejected) {
    if (rejected == null) {
      return;
    }
    CompletableFuture<Outcome> cached = authorizations.getIfPresent(key);
    if (cached != null
        && cached.isDone()
        && !cached.isCompletedExceptionally()
        && rejected.equals(cached.join().authorization())) {
      authorizations.asMap().remove(key, cached);
    }
  }

  @SuppressWarnings("FutureReturnValueIgnored") // only drops a failed entry; callers wait on future
  private Mono<UpstreamAuthorization> load(
      Upstream upstream, RepositoryName repository, Key key, String challenge) {
    CompletableFuture<Outcome> future =
        authorizations.get(
            key,
            (k, executor) ->
                metrics
                    .time(
                        upstream,
                        "auth",
                        authorize(upstream, repository, AuthChallenge.parse(challenge)))
                    .map(authorization -> new Outcome(authorization, null))
                    .onErrorResume(e -> Mono.just(new Outcome(null, e)))
                    .toFuture());
    future.thenAccept(
        outcome -> {
          if (outcome.failure() != null) {
            authorizations.asMap().remove(key, future); // the next request tries again
          }
        });
    // The wait for a token: its own request, or one another request started (Caffeine's
    // single-flight).
    return PullSpan.around("upstream token", "registry.upstream", upstream.key(), unwrap(future));
  }

  private static Mono<UpstreamAuthorization> unwrap(CompletableFuture<Outcome> future) {
    // suppressCancel: one impatient caller must not cancel the token request others wait for.
    return Mono.fromFuture(future, true)
        .flatMap(
            outcome ->
                outcome.failure() != null
                    ? Mono.error(outcome.failure())
                    : Mono.just(outcome.authorization()));
  }

  /** Credential lookup (blocking, on its scheduler), then Basic, or a token for Bearer. */
  private Mono<UpstreamAuthorization> authorize(
      Upstream upstream, RepositoryName repository, AuthChallenge challenge) {
    return Mono.fromCallable(() -> credential(upstream, repository))
        .subscribeOn(blocking)
        .flatMap(
            credential -> {
              if (challenge.isBasic()) {
                Credential c =
                    credential.orElseThrow(
                        () ->
                            WebClientTokenProvider.unauthorized(
                                upstream,
                                upstream.passthrough()
                                    ? "requires a login (Basic challenge) and the client gave no credentials"
                                    : "requires a login (Basic challenge) but no credentials are configured "
                                        + "(registry-cache.upstreams."
                                        + upstream.key()
                                        + ".username)"));
                return Mono.just(UpstreamAuthorization.basic(c.getUsername(), c.getPassword()));
              }
              if (!challenge.isBearer()) {
                return Mono.error(
                    WebClientTokenProvider.unauthorized(
                        upstream,
                        "unsupported authentication scheme '" + challenge.scheme() + "'"));
              }
              return tokens.token(upstream, repository, challenge, credential);
            });
  }

  private static Optional<Credential> credential(Upstream upstream, RepositoryName repository) {
    if (upstream.passthrough()) {
      ClientCredential client = upstream.clientCredential();
      return client.anonymous()
          ? Optional.empty()
          : Optional.of(Credential.from(client.user(), client.password()));
    }
    try {
      return UpstreamCredentials.resolve(upstream, repository);
    } catch (IllegalStateException e) {
      throw WebClientTokenProvider.unauthorized(upstream, e.getMessage());
    }
  }
}
