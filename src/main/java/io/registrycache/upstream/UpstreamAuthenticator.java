package io.registrycache.upstream;

import com.github.benmanes.caffeine.cache.AsyncCache;
import com.github.benmanes.caffeine.cache.Caffeine;
import com.google.cloud.tools.jib.api.Credential;
import com.google.cloud.tools.jib.api.RegistryAuthenticationFailedException;
import com.google.cloud.tools.jib.http.Authorization;
import com.google.cloud.tools.jib.http.FailoverHttpClient;
import com.google.cloud.tools.jib.http.ResponseException;
import com.google.cloud.tools.jib.registry.JibPullAuthenticator;
import com.google.cloud.tools.jib.registry.RegistryAuthenticator;
import com.google.cloud.tools.jib.registry.RegistryCredentialsNotSentException;
import io.registrycache.oci.OciErrorCode;
import io.registrycache.oci.RepositoryName;
import java.io.IOException;
import java.time.Duration;
import java.util.Map;
import java.util.Optional;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.function.Function;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import org.springframework.http.HttpStatus;
import reactor.core.publisher.Mono;
import reactor.core.scheduler.Scheduler;

/**
 * Registry authentication, done by jib-core: on a {@code 401} with a {@code WWW-Authenticate}
 * challenge (RFC 9110 section 11.6.1), a {@code Basic} challenge gets the upstream's credential as
 * basic credentials (RFC 7617); a {@code Bearer} challenge gets a token from the realm through
 * jib's {@code RegistryAuthenticator.authenticatePull} (Docker Registry token authentication).
 *
 * <p>The resulting {@link Authorization} is cached per (upstream, repository) and used for
 * manifests, blobs and tags alike. Loading is single-flight: concurrent requests for one key share
 * one token request. The jib calls block, so they run on a dedicated bounded scheduler, never on
 * an event-loop thread. The last challenge of each upstream is remembered so that a repository
 * seen for the first time gets its token before its first request (saving one 401 round trip).
 *
 * <p>Never log an {@code Authorization} or a jib {@code Credential}: their {@code toString()}
 * print the secret.
 */
final class UpstreamAuthenticator {

  private static final Logger log = LoggerFactory.getLogger(UpstreamAuthenticator.class);
  private static final Pattern BASIC = Pattern.compile("^(?i)basic\\b.*");
  private static final Pattern REALM = Pattern.compile("realm=\"(.*?)\"");

  /** Key of a cached authorization. */
  record Key(String upstreamKey, String repository) {}

  /**
   * Outcome of one token load. Failures are values, not failed futures: Caffeine logs every
   * failed asynchronous load as a warning with its stack trace, and a wrong password is not a
   * reason for that. A failed outcome is removed from the cache at once.
   */
  private record Outcome(Authorization authorization, Throwable failure) {}

  /** Reads the TLS settings of an upstream for its token requests. */
  interface TlsLookup extends Function<Upstream, UpstreamTls> {}

  private final AsyncCache<Key, Outcome> authorizations;
  private final Map<String, String> challenges = new ConcurrentHashMap<>();
  private final Scheduler blocking;
  private final TlsLookup tls;
  private final UpstreamMetrics metrics;
  private final String userAgent;

  /**
   * @param tokenTtl how long an authorization is reused; jib drops the token's {@code expires_in},
   *     so this stays at or below the spec's default token lifetime of 60 s, and a 401 refreshes
   *     earlier
   */
  UpstreamAuthenticator(
      Scheduler blocking,
      TlsLookup tls,
      UpstreamMetrics metrics,
      String userAgent,
      Duration tokenTtl) {
    this.blocking = blocking;
    this.tls = tls;
    this.metrics = metrics;
    this.userAgent = userAgent;
    this.authorizations =
        Caffeine.newBuilder().expireAfterWrite(tokenTtl).maximumSize(10_000).buildAsync();
  }

  /**
   * The authorization to send first: a cached one, a fresh one when the upstream's challenge is
   * already known, or none (try anonymously, a 401 tells what is needed).
   */
  Mono<Optional<Authorization>> current(Upstream upstream, RepositoryName repository) {
    Key key = new Key(upstream.key(), repository.value());
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
   * callers. {@code rejected} (what the upstream just refused, or {@code null}) is dropped from
   * the cache first, but only if no one replaced it yet, so a burst of 401s costs one token.
   */
  Mono<Authorization> answer(
      Upstream upstream, RepositoryName repository, String challenge, Authorization rejected) {
    challenges.put(upstream.key(), challenge);
    Key key = new Key(upstream.key(), repository.value());
    forget(key, rejected);
    return load(upstream, repository, key, challenge);
  }

  /** Drops {@code rejected} from the cache unless it was replaced meanwhile. */
  void forget(Upstream upstream, RepositoryName repository, Authorization rejected) {
    forget(new Key(upstream.key(), repository.value()), rejected);
  }

  private void forget(Key key, Authorization rejected) {
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

  private Mono<Authorization> load(
      Upstream upstream, RepositoryName repository, Key key, String challenge) {
    CompletableFuture<Outcome> future =
        authorizations.get(
            key,
            (k, executor) ->
                metrics
                    .time(
                        upstream,
                        "auth",
                        Mono.fromCallable(() -> authorize(upstream, repository, challenge))
                            .subscribeOn(blocking)
                            // jib's own HTTP timeout (jib.httpTimeout, 20 s) applies inside.
                            .timeout(tokenTimeout(upstream))
                            .onErrorMap(
                                e -> !(e instanceof UpstreamException),
                                e -> UpstreamErrors.fromTransport(upstream, "a token", e)))
                    .map(authorization -> new Outcome(authorization, null))
                    .onErrorResume(e -> Mono.just(new Outcome(null, e)))
                    .toFuture());
    future.thenAccept(
        outcome -> {
          if (outcome.failure() != null) {
            authorizations.asMap().remove(key, future); // the next request tries again
          }
        });
    return unwrap(future);
  }

  private static Mono<Authorization> unwrap(CompletableFuture<Outcome> future) {
    // suppressCancel: one impatient caller must not cancel the token request others wait for.
    return Mono.fromFuture(future, true)
        .flatMap(
            outcome ->
                outcome.failure() != null
                    ? Mono.error(outcome.failure())
                    : Mono.just(outcome.authorization()));
  }

  private static Duration tokenTimeout(Upstream upstream) {
    return upstream.settings().getConnectTimeout().plus(upstream.settings().getReadTimeout());
  }

  /** Blocking: credential lookup and, for Bearer, the token request. */
  private Authorization authorize(Upstream upstream, RepositoryName repository, String challenge) {
    Optional<Credential> credential;
    try {
      credential = UpstreamCredentials.resolve(upstream, repository);
    } catch (IllegalStateException e) {
      throw unauthorized(upstream, e.getMessage(), null);
    }
    if (BASIC.matcher(challenge).matches()) {
      Credential c =
          credential.orElseThrow(
              () ->
                  unauthorized(
                      upstream,
                      "requires a login (Basic challenge) but no credentials are configured "
                          + "(registry-cache.upstreams." + upstream.key() + ".username)",
                      null));
      return Authorization.fromBasicCredentials(c.getUsername(), c.getPassword());
    }
    String realm = realmOf(challenge);
    FailoverHttpClient http = JibTokenHttp.create(upstream, tls.apply(upstream));
    try {
      Optional<RegistryAuthenticator> authenticator =
          JibPullAuthenticator.forChallenge(
              challenge, upstream.url().getAuthority(), repository.value(), userAgent, http);
      if (authenticator.isEmpty()) { // jib's own Basic detection; ours matched first
        throw unauthorized(upstream, "unsupported challenge", null);
      }
      Authorization authorization = authenticator.get().authenticatePull(credential.orElse(null));
      log.debug(
          "upstream '{}': token for repository {} obtained from {}", upstream.key(), repository, realm);
      return authorization;
    } catch (RegistryCredentialsNotSentException e) {
      throw unauthorized(
          upstream,
          "token realm " + realm + " refused the request; credentials are not sent over plain HTTP",
          null);
    } catch (RegistryAuthenticationFailedException e) {
      throw fromTokenFailure(upstream, realm, e, credential.orElse(null));
    } finally {
      try {
        http.shutDown(); // jib keeps every transport and response until shutDown
      } catch (IOException e) {
        log.debug("upstream '{}': closing the token client failed: {}", upstream.key(), e.toString());
      }
    }
  }

  private UpstreamException fromTokenFailure(
      Upstream upstream, String realm, RegistryAuthenticationFailedException e, Credential credential) {
    String prefix = "token request to " + realm + " failed";
    ResponseException response = find(e, ResponseException.class);
    if (response != null) {
      int status = response.getStatusCode();
      if (status == 401) {
        return unauthorized(upstream, "token realm " + realm + " rejected the credentials (401)", e);
      }
      if (status == 403) {
        return new UpstreamException(
            upstream.key(), OciErrorCode.DENIED, HttpStatus.FORBIDDEN,
            UpstreamErrors.name(upstream) + ": token realm " + realm + " denied pull access (403)",
            null, null);
      }
      return UpstreamErrors.fromStatus(
          upstream, "a token from " + realm, OciErrorCode.UNAUTHORIZED, status,
          response.getHeaders() == null ? null : response.getHeaders().getFirstHeaderStringValue("Retry-After"),
          null, java.time.Clock.systemUTC());
    }
    if (e.getCause() instanceof IOException io) {
      return UpstreamErrors.fromTransport(upstream, "a token from " + realm, io);
    }
    // jib's message may quote request parameters (with an OAuth2 refresh token): scrub secrets.
    String message = scrub(String.valueOf(e.getMessage()), credential);
    return new UpstreamException(
        upstream.key(), OciErrorCode.UNAUTHORIZED, HttpStatus.UNAUTHORIZED,
        UpstreamErrors.name(upstream) + ": " + prefix + ": " + message, null, null);
  }

  static String scrub(String message, Credential credential) {
    if (credential == null || credential.getPassword() == null || credential.getPassword().isEmpty()) {
      return message;
    }
    return message.replace(credential.getPassword(), "***");
  }

  @SuppressWarnings("unused") // the cause is dropped on purpose: jib's messages may hold secrets
  private static UpstreamException unauthorized(Upstream upstream, String why, Throwable cause) {
    return new UpstreamException(
        upstream.key(), OciErrorCode.UNAUTHORIZED, HttpStatus.UNAUTHORIZED,
        UpstreamErrors.name(upstream) + ": " + why, null, null);
  }

  static String realmOf(String challenge) {
    Matcher m = REALM.matcher(challenge);
    return m.find() ? m.group(1) : "(no realm)";
  }

  private static <T extends Throwable> T find(Throwable t, Class<T> type) {
    for (Throwable c = t; c != null; c = c.getCause() == c ? null : c.getCause()) {
      if (type.isInstance(c)) {
        return type.cast(c);
      }
    }
    return null;
  }
}
