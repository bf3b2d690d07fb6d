package io.registrycache.upstream;

import com.github.benmanes.caffeine.cache.Ticker;
import io.micrometer.core.instrument.MeterRegistry;
import io.registrycache.oci.OciErrorCode;
import io.registrycache.oci.OciException;
import io.registrycache.oci.RepositoryName;
import io.registrycache.tracing.PullSpan;
import java.net.URI;
import java.nio.charset.StandardCharsets;
import java.time.Clock;
import java.time.Duration;
import java.util.Collection;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.function.Function;
import java.util.function.Supplier;
import org.springframework.core.ResolvableType;
import org.springframework.core.codec.ByteArrayDecoder;
import org.springframework.core.io.buffer.DataBuffer;
import org.springframework.core.io.buffer.DataBufferLimitException;
import org.springframework.core.io.buffer.DataBufferUtils;
import org.springframework.http.HttpHeaders;
import org.springframework.http.HttpMethod;
import org.springframework.web.util.UriComponentsBuilder;
import reactor.core.publisher.Flux;
import reactor.core.publisher.Mono;
import reactor.core.scheduler.Scheduler;
import reactor.core.scheduler.Schedulers;
import reactor.netty.resources.LoopResources;

/**
 * The one caller every upstream endpoint goes through, as jib-core's {@code
 * RegistryEndpointCaller}: per upstream one connection pool ({@link UpstreamConnection}); per
 * (upstream, repository) one cached {@code Authorization}, answered from a {@code 401} challenge
 * and sent again once ({@link UpstreamAuthenticator}); redirects (RFC 9110 section 15.4) followed
 * at most {@code redirect.max-hops} and only where {@link UpstreamAddressPolicy} allows, {@code
 * Authorization} only to the upstream's own origin; each attempt timed ({@link UpstreamMetrics})
 * and put behind the upstream's circuit breaker and retries ({@link UpstreamResilience}). The
 * endpoint classes ({@link ManifestPuller}, {@link BlobPuller}, {@link TagLister}, {@link
 * ReferrersLister}) say only what to ask and how to read the answer.
 *
 * <p>Requests go out on the connection's Reactor Netty {@code HttpClient} directly, not through
 * Spring's {@code WebClient} (fewer layers and classes on every cold pull, docs/performance.md):
 * one {@link UpstreamConnection#exchange} per request, redirect or challenge answered.
 */
final class UpstreamCaller {

  // A joined body's bytes: Spring's decoder copies them out and releases the buffer.
  private static final ByteArrayDecoder BODY = new ByteArrayDecoder();
  private static final ResolvableType BYTE_ARRAY = ResolvableType.forClass(byte[].class);

  /** Largest tags or referrers list page read, in bytes. */
  static final int MAX_LIST_BYTES = 16 * 1024 * 1024;

  /** How much of an error body is read for the message, in bytes. */
  static final int ERROR_BODY_BYTES = 4096;

  /** How much of a redirect or challenge body is drained to keep the connection, in bytes. */
  static final int DRAIN_BYTES = 64 * 1024;

  /** What to send: method, target, and the optional {@code Accept} list and {@code Range} value. */
  record Request(
      HttpMethod method, URI uri, RepositoryName name, List<String> accept, String range) {
    static Request get(URI uri, RepositoryName name, List<String> accept) {
      return new Request(HttpMethod.GET, uri, name, accept, null);
    }

    static Request head(URI uri, RepositoryName name, List<String> accept) {
      return new Request(HttpMethod.HEAD, uri, name, accept, null);
    }
  }

  /** One HTTP exchange as received; {@code body} must be consumed or drained. */
  record Reply(
      int status,
      HttpHeaders headers,
      Flux<DataBuffer> body,
      UpstreamAuthorization sent,
      boolean fromUpstream) {
    boolean ok() {
      return status >= 200 && status < 300;
    }
  }

  private final String userAgent;
  private final Map<String, UpstreamConnection> connections = new ConcurrentHashMap<>();
  private final LoopResources loops =
      LoopResources.create(
          "upstream", Math.max(2, Runtime.getRuntime().availableProcessors()), true);
  private final UpstreamMetrics metrics;
  private final UpstreamResilience resilience;
  private final UpstreamAuthenticator authenticator;
  private final Scheduler authScheduler;
  private final Clock clock = Clock.systemUTC();
  private volatile Supplier<Collection<Integer>> ownPorts = Set::of;
  private final UpstreamAddressPolicy policy = new UpstreamAddressPolicy(() -> ownPorts.get());
  private final boolean traced; // with tracing off, no request enters the tracing classes

  /**
   * @param tokenTicker the time source of token reuse ({@link UpstreamAuthenticator})
   * @param traced whether attempts are traced ({@code management.tracing.export.enabled})
   */
  UpstreamCaller(
      MeterRegistry meterRegistry,
      UpstreamResilience resilience,
      String userAgent,
      Ticker tokenTicker,
      boolean traced) {
    this.traced = traced;
    this.userAgent = userAgent;
    this.metrics = new UpstreamMetrics(meterRegistry);
    this.resilience = resilience;
    // Credential lookups block (files, helper processes): a small pool, never an event loop.
    this.authScheduler = Schedulers.newBoundedElastic(8, 1024, "upstream-auth", 60, true);
    this.authenticator =
        new UpstreamAuthenticator(
            authScheduler,
            new WebClientTokenProvider(
                upstream -> connection(upstream).webClient(), policy, userAgent),
            metrics,
            tokenTicker);
  }

  UpstreamMetrics metrics() {
    return metrics;
  }

  /** The cache's own ports, which redirects and token realms may never reach on a local address. */
  void ownPorts(Supplier<Collection<Integer>> ports) {
    this.ownPorts = ports;
  }

  /** The connection pool of {@code upstream}, made on first use (TLS files read then). */
  UpstreamConnection connection(Upstream upstream) {
    UpstreamConnection existing = connections.get(upstream.key());
    if (existing != null) {
      return existing;
    }
    // The pool outlives any request: never the client credentials of a pass-through upstream.
    Upstream configured = upstream.withoutClient();
    return connections.computeIfAbsent(
        upstream.key(), k -> new UpstreamConnection(configured, loops, policy));
  }

  /**
   * Sends {@code request} and hands the reply to {@code read}, as one attempt behind the upstream's
   * circuit breaker and retries, timed as {@code kind}. The attempt ends when {@code read}'s {@code
   * Mono} does: a blob's reader returns with the headers and the body follows as a {@code Flux}, so
   * a retry never starts in the middle of a body. An attempt that ends without a result (cancelled,
   * failed, empty) reads and drops every reply body nobody subscribed to, so its connection goes
   * back to the pool instead of waiting for {@code read-timeout}. Transport failures become {@link
   * UpstreamException}s naming {@code what}.
   */
  <T> Mono<T> call(
      Upstream upstream, String kind, String what, Request request, Function<Reply, Mono<T>> read) {
    Mono<T> attempt =
        metrics.time(
            upstream,
            kind,
            Mono.defer(
                    () -> {
                      UpstreamConnection.Attempt replies = new UpstreamConnection.Attempt();
                      return execute(upstream, request, replies)
                          .flatMap(read)
                          .doOnNext(result -> replies.handedOn())
                          .doFinally(signal -> replies.releaseUnlessHandedOn());
                    })
                .onErrorMap(
                    e -> !(e instanceof OciException),
                    e -> UpstreamErrors.fromTransport(upstream, what, e)));
    // One span per attempt (docs/tracing.md): a blob's ends with the response headers, its first
    // byte.
    return resilience.protect(
        upstream,
        what,
        traced
            ? PullSpan.around("upstream " + kind, "registry.upstream", upstream.key(), attempt)
            : attempt);
  }

  /**
   * Sends the request with the cached authorization; on a 401 challenge from the upstream, gets a
   * new authorization (single-flight) and sends once more.
   */
  private Mono<Reply> execute(
      Upstream upstream, Request request, UpstreamConnection.Attempt attempt) {
    UpstreamConnection connection = connection(upstream);
    return authenticator
        .current(upstream, request.name())
        .flatMap(
            auth ->
                follow(
                    connection,
                    request.method(),
                    request.uri(),
                    request,
                    auth.orElse(null),
                    0,
                    attempt))
        .flatMap(
            reply -> {
              if (reply.status() != 401 || !reply.fromUpstream()) {
                return Mono.just(reply);
              }
              String challenge = reply.headers().getFirst(HttpHeaders.WWW_AUTHENTICATE);
              if (challenge == null || challenge.isBlank()) {
                return Mono.just(reply); // mapped to UNAUTHORIZED by the endpoint
              }
              return drain(reply)
                  .then(authenticator.answer(upstream, request.name(), challenge, reply.sent()))
                  .flatMap(
                      auth ->
                          follow(
                              connection,
                              request.method(),
                              request.uri(),
                              request,
                              auth,
                              0,
                              attempt))
                  .doOnNext(
                      second -> {
                        if (second.status() == 401 && second.fromUpstream()) {
                          authenticator.forget(upstream, request.name(), second.sent());
                        }
                      });
            });
  }

  /**
   * Sends and follows redirects where {@link UpstreamAddressPolicy} allows; {@code Authorization}
   * only to the upstream's origin.
   */
  private Mono<Reply> follow(
      UpstreamConnection connection,
      HttpMethod method,
      URI uri,
      Request request,
      UpstreamAuthorization auth,
      int hops,
      UpstreamConnection.Attempt attempt) {
    Upstream upstream = connection.upstream();
    // The first request goes to the upstream's own origin (every endpoint builds it on the
    // upstream's URL; a referrers page elsewhere is refused before); every redirect is checked.
    boolean sameOrigin = hops == 0 || UpstreamAddressPolicy.sameOrigin(uri, upstream.url());
    UpstreamAuthorization sent = sameOrigin ? auth : null;
    int maxHops = connection.maxRedirectHops();
    Mono<Void> allowed = hops == 0 ? Mono.empty() : policy.check(upstream, uri, "redirect");
    return allowed
        .then(
            Mono.defer(
                () ->
                    connection.exchange(
                        method, uri, request, userAgent, sent, sameOrigin, attempt)))
        .flatMap(
            reply -> {
              String location = reply.headers().getFirst(HttpHeaders.LOCATION);
              if (!isRedirect(reply.status()) || location == null) {
                return Mono.just(reply);
              }
              if (hops >= maxHops) {
                return drain(reply)
                    .then(
                        Mono.error(
                            UpstreamErrors.unavailable(
                                upstream,
                                "more than "
                                    + maxHops
                                    + " redirects for "
                                    + uri.getPath()
                                    + " (registry-cache.upstreams."
                                    + upstream.key()
                                    + ".redirect.max-hops)",
                                null)));
              }
              URI next;
              try {
                next = uri.resolve(location);
              } catch (IllegalArgumentException e) {
                return drain(reply)
                    .then(
                        Mono.error(
                            UpstreamErrors.unavailable(
                                upstream,
                                "redirect to an invalid Location for " + uri.getPath(),
                                e)));
              }
              HttpMethod nextMethod = reply.status() == 303 ? HttpMethod.GET : method;
              return drain(reply)
                  .then(follow(connection, nextMethod, next, request, auth, hops + 1, attempt));
            });
  }

  /**
   * The error for a non-2xx reply: {@code notFound} for a 404, else by {@link
   * UpstreamErrors#fromStatus}.
   */
  <T> Mono<T> failure(Upstream upstream, String what, OciErrorCode notFound, Reply reply) {
    return errorText(reply)
        .flatMap(
            text ->
                Mono.error(
                    UpstreamErrors.fromStatus(
                        upstream,
                        what,
                        notFound,
                        reply.status(),
                        reply.headers().getFirst(HttpHeaders.RETRY_AFTER),
                        text,
                        clock)));
  }

  /**
   * The body of a tag or referrers list, at most {@value #MAX_LIST_BYTES} bytes; beyond that {@code
   * UPSTREAM_UNAVAILABLE} (502).
   */
  static Mono<byte[]> listBody(Upstream upstream, String what, Reply reply) {
    return DataBufferUtils.join(reply.body(), MAX_LIST_BYTES)
        .map(body -> BODY.decode(body, BYTE_ARRAY, null, null))
        .defaultIfEmpty(new byte[0])
        .onErrorMap(
            DataBufferLimitException.class,
            e ->
                UpstreamErrors.unavailable(
                    upstream, what + " is larger than " + MAX_LIST_BYTES + " bytes", e));
  }

  /** The start of an error body (for the message); the rest is not read. */
  private static Mono<String> errorText(Reply reply) {
    return DataBufferUtils.join(DataBufferUtils.takeUntilByteCount(reply.body(), ERROR_BODY_BYTES))
        .map(
            buffer ->
                new String(BODY.decode(buffer, BYTE_ARRAY, null, null), StandardCharsets.UTF_8))
        .onErrorReturn("")
        .defaultIfEmpty("");
  }

  /** Reads and drops a small body so the connection can be reused; a big one is cut off. */
  static Mono<Void> drain(Reply reply) {
    return DataBufferUtils.takeUntilByteCount(reply.body(), DRAIN_BYTES)
        .doOnNext(DataBufferUtils::release)
        .then()
        .onErrorResume(e -> Mono.empty());
  }

  private static boolean isRedirect(int status) {
    return status == 301 || status == 302 || status == 303 || status == 307 || status == 308;
  }

  /** {@code <url>/v2/<name>/<kind>/<reference>}; name and reference are validated already. */
  static URI uri(Upstream upstream, RepositoryName name, String kind, String reference) {
    return UriComponentsBuilder.fromUri(upstream.url())
        .path("/v2/" + name.value() + "/" + kind + "/" + reference)
        .encode()
        .build()
        .toUri();
  }

  /**
   * Closes every connection pool, the event loops and the authentication scheduler. The pools are
   * closed first, so the loops shut down with no quiet period (Netty's default waits 2 s for tasks
   * that cannot come any more) and at most 2 s for running ones, as the peer loops do.
   */
  void close() {
    connections.values().forEach(UpstreamConnection::close);
    loops.disposeLater(Duration.ZERO, Duration.ofSeconds(2)).block(Duration.ofSeconds(5));
    connections.clear();
    authScheduler.dispose();
  }
}
