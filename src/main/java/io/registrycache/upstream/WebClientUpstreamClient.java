package io.registrycache.upstream;

import io.micrometer.core.instrument.MeterRegistry;
import io.registrycache.oci.Digest;
import io.registrycache.oci.LinkHeader;
import io.registrycache.oci.MediaTypes;
import io.registrycache.oci.OciErrorCode;
import io.registrycache.oci.OciException;
import io.registrycache.oci.Reference;
import io.registrycache.oci.RepositoryName;
import java.net.URI;
import java.nio.charset.StandardCharsets;
import java.time.Clock;
import java.time.Duration;
import java.util.Collection;
import java.util.LinkedHashSet;
import java.util.Set;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.concurrent.ConcurrentHashMap;
import org.springframework.beans.factory.DisposableBean;
import org.springframework.beans.factory.annotation.Autowired;
import org.springframework.context.EnvironmentAware;
import org.springframework.core.env.Environment;
import org.springframework.core.io.buffer.DataBuffer;
import org.springframework.core.io.buffer.DataBufferLimitException;
import org.springframework.core.io.buffer.DataBufferUtils;
import org.springframework.http.HttpHeaders;
import org.springframework.http.HttpMethod;
import org.springframework.http.HttpStatus;
import org.springframework.stereotype.Component;
import org.springframework.web.util.UriComponentsBuilder;
import reactor.core.publisher.Flux;
import reactor.core.publisher.Mono;
import reactor.netty.resources.LoopResources;
import reactor.core.scheduler.Scheduler;
import reactor.core.scheduler.Schedulers;

/**
 * {@link UpstreamClient} on Spring's {@code WebClient} over Reactor Netty; tokens come from
 * {@link WebClientTokenProvider}, credentials from jib-core's public API (see {@code
 * docs/jib-core.md}).
 *
 * <p>Per upstream: one connection pool with the upstream's TLS, {@code connect-timeout}, {@code
 * read-timeout} (between two reads) and {@code max-concurrent-requests} ({@link
 * UpstreamConnection}). Per (upstream, repository): one cached {@code Authorization}, obtained
 * after a {@code 401} challenge and reused for manifests, blobs and tags ({@link
 * UpstreamAuthenticator}).
 *
 * <p>Redirects (RFC 9110 section 15.4) are followed here, at most {@code redirect.max-hops}, and
 * only where {@link UpstreamAddressPolicy} allows; {@code Authorization} is sent only to the
 * upstream's own origin (scheme, host, port), never to a storage host it redirects to.
 *
 * <p>Every request runs behind the upstream's circuit breaker and is retried after transient
 * failures, up to the response headers, never in the middle of a blob body ({@link
 * UpstreamResilience}, {@code docs/resilience.md}).
 *
 * <p>Metrics: timer {@code registry.cache.upstream.request{upstream,kind,outcome}} (per attempt),
 * counter {@code registry.cache.upstream.fetched.bytes{upstream}} ({@link UpstreamMetrics}).
 */
@Component
public class WebClientUpstreamClient implements UpstreamClient, DisposableBean, EnvironmentAware {

  /** {@code User-Agent} of every upstream request, token requests included. */
  public static final String USER_AGENT = "registry-cache";

  /** Largest tags list page read, in bytes. */
  static final int MAX_TAGS_BYTES = 16 * 1024 * 1024;
  /** How much of an error body is read for the message, in bytes. */
  static final int ERROR_BODY_BYTES = 4096;
  /** How much of a redirect or challenge body is drained to keep the connection, in bytes. */
  static final int DRAIN_BYTES = 64 * 1024;

  private final Map<String, UpstreamConnection> connections = new ConcurrentHashMap<>();
  private final LoopResources loops =
      LoopResources.create("upstream", Math.max(2, Runtime.getRuntime().availableProcessors()), true);
  private final UpstreamMetrics metrics;
  private final UpstreamResilience resilience;
  private final UpstreamAuthenticator authenticator;
  private final Scheduler authScheduler;
  private final Clock clock = Clock.systemUTC();
  private volatile java.util.function.Supplier<Collection<Integer>> ownPorts = Set::of;
  private final UpstreamAddressPolicy policy = new UpstreamAddressPolicy(() -> ownPorts.get());

  /**
   * Builds the connection pools of all configured upstreams now, so that unreadable TLS files or
   * half-configured credentials fail the start-up.
   *
   * @throws IllegalStateException naming the setting that is wrong
   */
  @Autowired
  public WebClientUpstreamClient(
      Upstreams upstreams, MeterRegistry meterRegistry, UpstreamResilience resilience) {
    this.metrics = new UpstreamMetrics(meterRegistry);
    this.resilience = resilience;
    // Credential lookups block (files, helper processes): their own small pool, never an event loop.
    this.authScheduler = Schedulers.newBoundedElastic(8, 1024, "upstream-auth", 60, true);
    this.authenticator =
        new UpstreamAuthenticator(
            authScheduler,
            new WebClientTokenProvider(upstream -> connection(upstream).webClient(), policy, USER_AGENT),
            metrics);
    if (upstreams != null) {
      upstreams.all().forEach(this::connection);
    }
  }

  /** With its own {@link UpstreamResilience}; for tests that build a client alone. */
  WebClientUpstreamClient(Upstreams upstreams, MeterRegistry meterRegistry) {
    this(upstreams, meterRegistry, new UpstreamResilience(upstreams, meterRegistry));
  }

  /** Reads the cache's own ports (never a redirect or realm target) from the environment. */
  @Override
  public void setEnvironment(Environment environment) {
    ownPorts(
        () -> {
          Set<Integer> ports = new LinkedHashSet<>();
          for (String property :
              List.of("local.server.port", "local.management.port", "server.port", "management.server.port")) {
            Integer port = environment.getProperty(property, Integer.class);
            if (port != null && port > 0) {
              ports.add(port);
            }
          }
          // The internal peer endpoint of a scaled-out cache (docs/scale-out.md), when one is configured.
          if (environment.containsProperty("registry-cache.cluster.peers[0]")
              || environment.containsProperty("registry-cache.cluster.peers")
              || environment.containsProperty("registry-cache.cluster.peers-dns")) {
            ports.add(environment.getProperty("registry-cache.cluster.peer-port", Integer.class, 8082));
          }
          return ports;
        });
  }

  /** The cache's own ports, which redirects and token realms may never reach on a local address. */
  void ownPorts(java.util.function.Supplier<Collection<Integer>> ports) {
    this.ownPorts = ports;
  }

  @Override
  public Mono<UpstreamManifest> getManifest(
      Upstream upstream, RepositoryName name, Reference reference, List<String> accept, int maxBytes) {
    String what = "manifest " + describe(name, reference);
    URI uri = uri(upstream, name, "manifests", reference.toString());
    return call(upstream, "manifest", what, () ->
        execute(upstream, name, HttpMethod.GET, uri, accept)
            .flatMap(
                reply -> {
                  if (!reply.ok()) {
                    return failure(upstream, what, OciErrorCode.MANIFEST_UNKNOWN, reply);
                  }
                  long declared = reply.headers().getContentLength();
                  if (declared > maxBytes) {
                    return drain(reply).then(Mono.error(tooLarge(upstream, what, declared + " bytes", maxBytes)));
                  }
                  Digest digest;
                  try {
                    digest = upstreamDigest(upstream, what, reply.headers());
                  } catch (UpstreamException e) {
                    return drain(reply).then(Mono.error(e));
                  }
                  String mediaType = mediaType(reply.headers());
                  // join(…, max) stops reading and cancels as soon as the limit is passed.
                  return DataBufferUtils.join(reply.body(), maxBytes)
                      .map(WebClientUpstreamClient::toBytes)
                      .defaultIfEmpty(new byte[0])
                      .onErrorMap(
                          DataBufferLimitException.class,
                          e -> tooLarge(upstream, what, "more than " + maxBytes + " bytes", maxBytes))
                      .map(body -> new UpstreamManifest(body, mediaType, digest));
                }));
  }

  @Override
  public Mono<UpstreamManifestHead> headManifest(
      Upstream upstream, RepositoryName name, Reference reference, List<String> accept) {
    String what = "manifest " + describe(name, reference);
    URI uri = uri(upstream, name, "manifests", reference.toString());
    return call(upstream, "manifest", what, () ->
        execute(upstream, name, HttpMethod.HEAD, uri, accept)
            .flatMap(
                reply -> {
                  if (!reply.ok()) {
                    return failure(upstream, what, OciErrorCode.MANIFEST_UNKNOWN, reply);
                  }
                  return drain(reply)
                      .then(
                          Mono.fromCallable(
                              () ->
                                  new UpstreamManifestHead(
                                      upstreamDigest(upstream, what, reply.headers()),
                                      mediaType(reply.headers()),
                                      reply.headers().getContentLength())));
                }));
  }

  @Override
  public Mono<UpstreamBlob> getBlob(Upstream upstream, RepositoryName name, Digest digest) {
    return getBlob(upstream, name, digest, 0);
  }

  @Override
  public Mono<UpstreamBlob> getBlob(Upstream upstream, RepositoryName name, Digest digest, long offset) {
    String what = "blob " + name + "@" + digest + (offset > 0 ? " from byte " + offset : "");
    URI uri = uri(upstream, name, "blobs", digest.toString());
    String range = offset > 0 ? "bytes=" + offset + "-" : null;
    return call(upstream, "blob", what, () ->
        execute(upstream, name, HttpMethod.GET, uri, null, range)
            .flatMap(
                reply -> {
                  if (!reply.ok()) {
                    return failure(upstream, what, OciErrorCode.BLOB_UNKNOWN, reply);
                  }
                  Flux<DataBuffer> body =
                      metrics
                          .countBytes(upstream, reply.body())
                          .onErrorMap(e -> !(e instanceof OciException), e -> UpstreamErrors.fromTransport(upstream, what, e));
                  if (offset <= 0) {
                    return Mono.just(new UpstreamBlob(reply.headers().getContentLength(), body));
                  }
                  return resumed(upstream, what, offset, reply, body);
                }));
  }

  /**
   * The rest of a blob from {@code offset}: a {@code 206} whose {@code Content-Range} starts
   * there, or a {@code 200} (the range ignored) whose first {@code offset} bytes are skipped.
   * Anything else is {@code UPSTREAM_UNAVAILABLE} (502).
   */
  private Mono<UpstreamBlob> resumed(Upstream upstream, String what, long offset, Reply reply, Flux<DataBuffer> body) {
    if (reply.status() == 200) {
      metrics.resumed(upstream, false);
      return Mono.just(new UpstreamBlob(reply.headers().getContentLength(), UpstreamBlob.skip(body, offset)));
    }
    ContentRange range = ContentRange.parse(reply.headers().getFirst(HttpHeaders.CONTENT_RANGE));
    if (reply.status() != 206 || range == null || range.first() != offset) {
      return drain(reply).then(Mono.error(new UpstreamException(
          upstream.key(), OciErrorCode.UPSTREAM_UNAVAILABLE, HttpStatus.BAD_GATEWAY,
          UpstreamErrors.name(upstream) + ": " + what + ": answered " + reply.status() + " with Content-Range "
              + reply.headers().getFirst(HttpHeaders.CONTENT_RANGE),
          null, null)));
    }
    metrics.resumed(upstream, true);
    return Mono.just(new UpstreamBlob(range.total(), body));
  }

  /** {@code Content-Range: bytes <first>-<last>/<total>} (RFC 9110 14.4); total -1 for {@code *}. */
  record ContentRange(long first, long last, long total) {
    private static final java.util.regex.Pattern SYNTAX =
        java.util.regex.Pattern.compile("\\s*bytes\\s+(\\d+)-(\\d+)/(\\d+|\\*)\\s*");

    static ContentRange parse(String header) {
      if (header == null) {
        return null;
      }
      java.util.regex.Matcher m = SYNTAX.matcher(header);
      if (!m.matches()) {
        return null;
      }
      try {
        long total = m.group(3).equals("*") ? -1 : Long.parseLong(m.group(3));
        return new ContentRange(Long.parseLong(m.group(1)), Long.parseLong(m.group(2)), total);
      } catch (NumberFormatException e) {
        return null;
      }
    }
  }

  @Override
  public Mono<Long> headBlob(Upstream upstream, RepositoryName name, Digest digest) {
    String what = "blob " + name + "@" + digest;
    URI uri = uri(upstream, name, "blobs", digest.toString());
    return call(upstream, "blob", what, () ->
        execute(upstream, name, HttpMethod.HEAD, uri, null)
            .flatMap(
                reply -> {
                  if (!reply.ok()) {
                    return failure(upstream, what, OciErrorCode.BLOB_UNKNOWN, reply);
                  }
                  return drain(reply).thenReturn(reply.headers().getContentLength());
                }));
  }

  @Override
  public Mono<UpstreamTags> listTags(Upstream upstream, RepositoryName name, Integer n, String last) {
    String what = "tags of " + name;
    UriComponentsBuilder builder =
        UriComponentsBuilder.fromUri(upstream.url()).path("/v2/" + name.value() + "/tags/list");
    if (n != null) {
      builder.queryParam("n", n);
    }
    if (last != null) {
      builder.queryParam("last", "{last}"); // a template variable: encoded strictly, '+' too
    }
    URI uri = builder.encode().buildAndExpand(Map.of("last", Objects.toString(last, ""))).toUri();
    return call(upstream, "tags", what, () ->
        execute(upstream, name, HttpMethod.GET, uri, List.of("application/json"))
            .flatMap(
                reply -> {
                  if (!reply.ok()) {
                    return failure(upstream, what, OciErrorCode.NAME_UNKNOWN, reply);
                  }
                  String link = reply.headers().getFirst(HttpHeaders.LINK);
                  return listBody(upstream, what, reply).map(body -> new UpstreamTags(body, link));
                }));
  }

  @Override
  public Mono<UpstreamReferrers> listReferrers(Upstream upstream, RepositoryName name, Digest subject, URI page) {
    String what = "referrers of " + name + "@" + subject;
    URI uri = page != null ? page : uri(upstream, name, "referrers", subject.toString());
    if (!sameOrigin(upstream.url(), uri)) {
      return Mono.error(new UpstreamException(
          upstream.key(), OciErrorCode.UPSTREAM_UNAVAILABLE, HttpStatus.BAD_GATEWAY,
          UpstreamErrors.name(upstream) + ": " + what + ": next page is on another host", null, null));
    }
    return call(upstream, "referrers", what, () ->
        execute(upstream, name, HttpMethod.GET, uri, List.of("application/vnd.oci.image.index.v1+json"))
            .flatMap(
                reply -> {
                  if (!reply.ok()) {
                    return failure(upstream, what, OciErrorCode.NAME_UNKNOWN, reply);
                  }
                  URI next = nextPage(upstream.url(), reply.headers().getFirst(HttpHeaders.LINK));
                  return listBody(upstream, what, reply).map(body -> new UpstreamReferrers(body, next));
                }));
  }

  /**
   * The body of a tag or referrers list, at most {@value #MAX_TAGS_BYTES} bytes; beyond that
   * {@code UPSTREAM_UNAVAILABLE} (502).
   */
  private static Mono<byte[]> listBody(Upstream upstream, String what, Reply reply) {
    return DataBufferUtils.join(reply.body(), MAX_TAGS_BYTES)
        .map(WebClientUpstreamClient::toBytes)
        .defaultIfEmpty(new byte[0])
        .onErrorMap(
            DataBufferLimitException.class,
            e -> new UpstreamException(
                upstream.key(), OciErrorCode.UPSTREAM_UNAVAILABLE, HttpStatus.BAD_GATEWAY,
                UpstreamErrors.name(upstream) + ": " + what + " is larger than " + MAX_TAGS_BYTES + " bytes", null, e));
  }

  /** The target of {@code Link: <...>; rel="next"}, resolved against the upstream URL, or null. */
  static URI nextPage(URI base, String link) {
    return LinkHeader.nextTarget(link)
        .map(target -> {
          try {
            return base.resolve(target);
          } catch (IllegalArgumentException e) {
            return null;
          }
        })
        .orElse(null);
  }

  private static boolean sameOrigin(URI a, URI b) {
    return Objects.equals(a.getScheme(), b.getScheme())
        && Objects.equals(a.getHost(), b.getHost())
        && a.getPort() == b.getPort();
  }

  /** Closes every connection pool and the authentication scheduler. */
  @Override
  public void destroy() {
    connections.values().forEach(UpstreamConnection::close);
    loops.disposeLater().block(java.time.Duration.ofSeconds(5));
    connections.clear();
    authScheduler.dispose();
  }

  // ---------------------------------------------------------------------------------------------

  /** One HTTP exchange as received; {@code body} must be consumed or drained. */
  private record Reply(
      int status, HttpHeaders headers, Flux<DataBuffer> body, UpstreamAuthorization sent, boolean fromUpstream) {
    boolean ok() {
      return status >= 200 && status < 300;
    }
  }

  private UpstreamConnection connection(Upstream upstream) {
    UpstreamConnection existing = connections.get(upstream.key());
    if (existing != null) {
      return existing;
    }
    return connections.computeIfAbsent(upstream.key(), k -> new UpstreamConnection(upstream, loops, policy));
  }

  /**
   * Times each attempt, turns transport failures into {@link UpstreamException}s, and puts the
   * attempts behind the upstream's circuit breaker and retries ({@link UpstreamResilience}). The
   * exchange ends when the response headers are in (for blobs the body follows as a {@code Flux}),
   * so a retry never starts in the middle of a body.
   */
  private <T> Mono<T> call(
      Upstream upstream, String kind, String what, java.util.function.Supplier<Mono<T>> exchange) {
    Mono<T> attempt =
        metrics.time(
            upstream,
            kind,
            Mono.defer(exchange)
                .onErrorMap(
                    e -> !(e instanceof OciException),
                    e -> UpstreamErrors.fromTransport(upstream, what, e)));
    return resilience.protect(upstream, what, attempt);
  }

  /**
   * Sends the request with the cached authorization; on a 401 challenge from the upstream, gets
   * a new authorization from jib (single-flight) and sends once more.
   */
  private Mono<Reply> execute(
      Upstream upstream, RepositoryName name, HttpMethod method, URI uri, List<String> accept) {
    return execute(upstream, name, method, uri, accept, null);
  }

  /** @param range a {@code Range} header value, or null */
  private Mono<Reply> execute(
      Upstream upstream, RepositoryName name, HttpMethod method, URI uri, List<String> accept, String range) {
    UpstreamConnection connection = connection(upstream);
    return authenticator
        .current(upstream, name)
        .flatMap(auth -> follow(connection, method, uri, accept, range, auth.orElse(null), 0))
        .flatMap(
            reply -> {
              if (reply.status() != 401 || !reply.fromUpstream()) {
                return Mono.just(reply);
              }
              String challenge = reply.headers().getFirst(HttpHeaders.WWW_AUTHENTICATE);
              if (challenge == null || challenge.isBlank()) {
                return Mono.just(reply); // mapped to UNAUTHORIZED by the caller
              }
              return drain(reply)
                  .then(authenticator.answer(upstream, name, challenge, reply.sent()))
                  .flatMap(auth -> follow(connection, method, uri, accept, range, auth, 0))
                  .doOnNext(
                      second -> {
                        if (second.status() == 401 && second.fromUpstream()) {
                          authenticator.forget(upstream, name, second.sent());
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
      List<String> accept,
      String range,
      UpstreamAuthorization auth,
      int hops) {
    Upstream upstream = connection.upstream();
    boolean sameOrigin = UpstreamAddressPolicy.sameOrigin(uri, upstream.url());
    UpstreamAuthorization sent = sameOrigin ? auth : null;
    int maxHops = Math.max(0, upstream.settings().redirect().maxHops());
    // The first request goes to the upstream's own origin; every redirect target is checked.
    Mono<Void> allowed = hops == 0 ? Mono.empty() : policy.check(upstream, uri, "redirect");
    return allowed.then(connection
        .webClient()
        .method(method)
        .uri(uri)
        .headers(
            h -> {
              h.set(HttpHeaders.USER_AGENT, USER_AGENT);
              if (accept != null && !accept.isEmpty()) {
                h.set(HttpHeaders.ACCEPT, String.join(", ", accept));
              }
              if (sent != null) {
                h.set(HttpHeaders.AUTHORIZATION, sent.header());
              }
              if (range != null) {
                h.set(HttpHeaders.RANGE, range);
              }
            })
        .retrieve()
        .onStatus(status -> true, response -> Mono.empty()) // every status is handled here
        .toEntityFlux(DataBuffer.class)
        .map(
            entity ->
                new Reply(
                    entity.getStatusCode().value(),
                    entity.getHeaders(),
                    minTransferRate(upstream, Objects.requireNonNullElse(entity.getBody(), Flux.empty())),
                    sent,
                    sameOrigin)))
        .flatMap(
            reply -> {
              String location = reply.headers().getFirst(HttpHeaders.LOCATION);
              if (!isRedirect(reply.status()) || location == null) {
                return Mono.just(reply);
              }
              if (hops >= maxHops) {
                return drain(reply)
                    .then(Mono.error(new UpstreamException(
                        upstream.key(), OciErrorCode.UPSTREAM_UNAVAILABLE, HttpStatus.BAD_GATEWAY,
                        UpstreamErrors.name(upstream) + ": more than " + maxHops
                            + " redirects for " + uri.getPath()
                            + " (registry-cache.upstreams." + upstream.key() + ".redirect.max-hops)",
                        null, null)));
              }
              URI next;
              try {
                next = uri.resolve(location);
              } catch (IllegalArgumentException e) {
                return drain(reply)
                    .then(Mono.error(new UpstreamException(
                        upstream.key(), OciErrorCode.UPSTREAM_UNAVAILABLE, HttpStatus.BAD_GATEWAY,
                        UpstreamErrors.name(upstream) + ": redirect to an invalid Location for "
                            + uri.getPath(), null, e)));
              }
              HttpMethod nextMethod = reply.status() == 303 ? HttpMethod.GET : method;
              return drain(reply).then(follow(connection, nextMethod, next, accept, range, auth, hops + 1));
            });
  }

  /**
   * {@code body}, failing with {@link TransportFailure.SlowTransferException} once its average
   * rate since the response headers falls below {@code min-transfer-rate} after {@code
   * min-transfer-rate-grace}: a body dripping a byte now and then passes the idle {@code
   * read-timeout} but not this. After {@code n} bytes the next {@code n} are due by {@code grace +
   * n / rate} from the start. Checked once a second by one timer per body, not per buffer.
   */
  static Flux<DataBuffer> minTransferRate(Upstream upstream, Flux<DataBuffer> body) {
    long rate = upstream.settings().minTransferRate() == null
        ? 0 : upstream.settings().minTransferRate().toBytes();
    if (rate <= 0) {
      return body;
    }
    Duration grace = upstream.settings().minTransferRateGrace();
    return Flux.defer(
        () -> {
          long start = System.nanoTime();
          java.util.concurrent.atomic.AtomicLong received = new java.util.concurrent.atomic.AtomicLong();
          Mono<Void> tooSlow = Flux.interval(Duration.ofSeconds(1), Duration.ofSeconds(1))
              .filter(tick -> {
                long n = received.get();
                return System.nanoTime() - start > grace.toNanos() + n * 1_000_000_000L / rate;
              })
              .next()
              .flatMap(tick -> Mono.<Void>error(
                  new TransportFailure.SlowTransferException(
                      "body slower than min-transfer-rate " + rate + " bytes/s: "
                          + received.get() + " bytes in "
                          + Duration.ofNanos(System.nanoTime() - start).toMillis() + " ms"
                          + " (registry-cache.upstreams." + upstream.key() + ".min-transfer-rate)")));
          return body.doOnNext(buffer -> received.addAndGet(buffer.readableByteCount()))
              .takeUntilOther(tooSlow)
              .doOnDiscard(DataBuffer.class, DataBufferUtils::release);
        });
  }

  private <T> Mono<T> failure(Upstream upstream, String what, OciErrorCode notFound, Reply reply) {
    return errorText(reply)
        .flatMap(
            text ->
                Mono.error(
                    UpstreamErrors.fromStatus(
                        upstream, what, notFound, reply.status(),
                        reply.headers().getFirst(HttpHeaders.RETRY_AFTER), text, clock)));
  }

  /** The start of an error body (for the message); the rest is not read. */
  private static Mono<String> errorText(Reply reply) {
    return DataBufferUtils.join(DataBufferUtils.takeUntilByteCount(reply.body(), ERROR_BODY_BYTES))
        .map(buffer -> new String(toBytes(buffer), StandardCharsets.UTF_8))
        .onErrorReturn("")
        .defaultIfEmpty("");
  }

  /** Reads and drops a small body so the connection can be reused; a big one is cut off. */
  private static Mono<Void> drain(Reply reply) {
    return DataBufferUtils.takeUntilByteCount(reply.body(), DRAIN_BYTES)
        .doOnNext(DataBufferUtils::release)
        .then()
        .onErrorResume(e -> Mono.empty());
  }

  private static byte[] toBytes(DataBuffer buffer) {
    try {
      byte[] bytes = new byte[buffer.readableByteCount()];
      buffer.read(bytes);
      return bytes;
    } finally {
      DataBufferUtils.release(buffer);
    }
  }

  /**
   * The upstream's {@code Docker-Content-Digest}, or {@code null} when absent.
   *
   * @throws UpstreamException {@code UPSTREAM_UNAVAILABLE} (502) when it is malformed
   */
  static Digest upstreamDigest(Upstream upstream, String what, HttpHeaders headers) {
    String value = headers.getFirst("Docker-Content-Digest");
    if (value == null || value.isBlank()) {
      return null;
    }
    try {
      return Digest.parse(value.trim());
    } catch (OciException e) {
      throw new UpstreamException(
          upstream.key(), OciErrorCode.UPSTREAM_UNAVAILABLE, HttpStatus.BAD_GATEWAY,
          UpstreamErrors.name(upstream) + ": upstream sent an invalid digest for " + what + " ("
              + e.getMessage() + ")",
          null, e);
    }
  }

  private static String mediaType(HttpHeaders headers) {
    return MediaTypes.essence(headers.getFirst(HttpHeaders.CONTENT_TYPE));
  }

  private static UpstreamException tooLarge(Upstream upstream, String what, String size, int maxBytes) {
    return new UpstreamException(
        upstream.key(), OciErrorCode.MANIFEST_INVALID, HttpStatus.BAD_GATEWAY,
        UpstreamErrors.name(upstream) + ": " + what + " is " + size + ", above the limit of "
            + maxBytes + " bytes (registry-cache.manifests.max-size-bytes)",
        null, null);
  }

  private static boolean isRedirect(int status) {
    return status == 301 || status == 302 || status == 303 || status == 307 || status == 308;
  }

  /** {@code <url>/v2/<name>/<kind>/<reference>}; name and reference are validated already. */
  private static URI uri(Upstream upstream, RepositoryName name, String kind, String reference) {
    return UriComponentsBuilder.fromUri(upstream.url())
        .path("/v2/" + name.value() + "/" + kind + "/" + reference)
        .encode()
        .build()
        .toUri();
  }

  private static String describe(RepositoryName name, Reference reference) {
    return name + (reference instanceof Reference.ByDigest ? "@" : ":") + reference;
  }
}
