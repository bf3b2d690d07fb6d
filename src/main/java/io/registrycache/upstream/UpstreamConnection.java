package io.registrycache.upstream;

import io.netty.channel.AdaptiveRecvByteBufAllocator;
import io.netty.channel.ChannelOption;
import io.netty.handler.codec.http.HttpHeaderNames;
import io.registrycache.config.UpstreamProperties;
import java.net.URI;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;
import javax.net.ssl.SSLEngine;
import javax.net.ssl.SSLParameters;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import org.springframework.core.io.buffer.DataBuffer;
import org.springframework.core.io.buffer.DataBufferUtils;
import org.springframework.core.io.buffer.NettyDataBufferFactory;
import org.springframework.http.HttpHeaders;
import org.springframework.http.HttpMethod;
import org.springframework.http.client.reactive.ReactorClientHttpConnector;
import org.springframework.http.support.Netty4HeadersAdapter;
import org.springframework.web.reactive.function.client.WebClient;
import reactor.core.publisher.Flux;
import reactor.core.publisher.Mono;
import reactor.netty.Connection;
import reactor.netty.NettyInbound;
import reactor.netty.http.HttpResources;
import reactor.netty.http.client.HttpClient;
import reactor.netty.resources.ConnectionProvider;
import reactor.netty.resources.LoopResources;

/**
 * The HTTP side of one upstream: its own connection pool and Reactor Netty {@link HttpClient} with
 * the upstream's TLS, timeouts and concurrency bound. Registry requests (manifests, blobs, tags,
 * referrers) go out on the {@link HttpClient} itself, one {@link #exchange} each, for {@link
 * UpstreamCaller}; token requests ({@link WebClientTokenProvider}, rare) on a {@link WebClient}
 * over the same client and pool.
 *
 * <ul>
 *   <li>{@code connect-timeout}: TCP connect ({@code CONNECT_TIMEOUT_MILLIS}).
 *   <li>{@code read-timeout}: Reactor Netty's response timeout, an idle timeout between two reads
 *       of a response (headers, then every body chunk), so a hanging upstream fails.
 *   <li>{@code min-transfer-rate} after {@code min-transfer-rate-grace}: a body's average rate
 *       ({@link #minTransferRate}).
 *   <li>{@code max-concurrent-requests}: the pool's {@code maxConnections} (HTTP/1.1: one request
 *       per connection); more requests wait in a bounded queue, then fail with 503.
 *   <li>Redirects are not followed here: {@link UpstreamCaller} follows them itself so it decides
 *       where {@code Authorization} goes.
 *   <li>No {@code Accept-Encoding}: blob and manifest bytes must arrive exactly as stored.
 * </ul>
 */
final class UpstreamConnection implements AutoCloseable {

  /**
   * Largest single read from an upstream connection, in bytes. Above 256 KiB Netty's allocator does
   * not pool (with the shipped heap), but a GiB in 1,024 buffers instead of 4,096 costs less CPU
   * all the same (docs/performance.md).
   */
  static final int RECEIVE_BUFFER_MAX = 1 << 20;

  private static final Logger log = LoggerFactory.getLogger(UpstreamConnection.class);

  private final Upstream upstream;
  private final UpstreamTls tls;
  private final ConnectionProvider pool;
  private final HttpClient http;
  private final int maxRedirectHops;
  private final long minTransferRate;
  private final Duration minTransferRateGrace;
  private volatile WebClient webClient;

  /** With Reactor Netty's JVM-wide event loops; for tests that build one connection alone. */
  UpstreamConnection(Upstream upstream) {
    this(upstream, HttpResources.get(), UpstreamAddressPolicy.NO_OWN_PORTS);
  }

  /**
   * @param loops event loops owned by the upstream client, not Reactor Netty's JVM-wide ones: a
   *     Spring context that closes disposes those, which would leave this client hanging
   * @param policy where redirects may lead; applied to every address connected to
   */
  UpstreamConnection(Upstream upstream, LoopResources loops, UpstreamAddressPolicy policy) {
    this.upstream = upstream;
    UpstreamProperties settings = upstream.settings();
    UpstreamCredentials.validate(upstream.key(), settings);
    // Read once here, not from the settings on every request.
    this.maxRedirectHops = Math.max(0, settings.redirect().maxHops());
    this.minTransferRate =
        settings.minTransferRate() == null ? 0 : settings.minTransferRate().toBytes();
    this.minTransferRateGrace = settings.minTransferRateGrace();
    this.tls = UpstreamTls.from(upstream.key(), settings.tls());
    if (tls.insecureSkipVerify()) {
      log.warn(
          "upstream '{}': TLS certificate verification is OFF (tls.insecure-skip-verify)",
          upstream.key());
    }
    int max = Math.max(1, settings.maxConcurrentRequests());
    Duration readTimeout = settings.readTimeout();
    this.pool =
        ConnectionProvider.builder("upstream-" + upstream.key())
            .maxConnections(max)
            .pendingAcquireMaxCount(max * 16)
            .pendingAcquireTimeout(
                readTimeout.compareTo(Duration.ofSeconds(45)) > 0
                    ? readTimeout
                    : Duration.ofSeconds(45))
            .maxIdleTime(Duration.ofSeconds(30))
            .evictInBackground(Duration.ofSeconds(30))
            .build();
    HttpClient http =
        HttpClient.create(pool)
            .runOn(loops)
            .option(
                ChannelOption.CONNECT_TIMEOUT_MILLIS, (int) settings.connectTimeout().toMillis())
            // Reads of up to 1 MiB when the socket has that much (a large blob on a fast link):
            // fewer reads, fewer buffers handed through the pull path per GiB.
            .option(
                ChannelOption.RCVBUF_ALLOCATOR,
                new AdaptiveRecvByteBufAllocator(512, 16 * 1024, RECEIVE_BUFFER_MAX))
            .responseTimeout(readTimeout)
            // The body as it was read (not cut into 8 KiB pieces, Netty's default).
            .httpResponseDecoder(spec -> spec.maxChunkSize(RECEIVE_BUFFER_MAX))
            .followRedirect(false)
            .compress(false);
    // Every name resolved for a connection passes the redirect policy (DNS rebinding).
    http = http.resolver(policy.resolverGroup(upstream, http.configuration().resolver()));
    // An https upstream, or any upstream with TLS settings of its own, gets its TLS context now
    // (settings read and checked at start). A plain-http upstream with the JVM's default trust
    // leaves it to Reactor Netty, which builds its default client context (the JVM's CAs, host
    // name verification on) only when a redirect first leads to an https storage host: building
    // one costs ~0.3 s of start-up (docs/performance.md, Start-up).
    if (!"http".equalsIgnoreCase(upstream.url().getScheme()) || !tls.isJvmDefault()) {
      http =
          http.secure(
              spec -> {
                var builder = spec.sslContext(tls.nettyContext());
                if (tls.insecureSkipVerify()) {
                  builder.handlerConfigurator(
                      handler -> {
                        SSLEngine engine = handler.engine();
                        SSLParameters parameters = engine.getSSLParameters();
                        parameters.setEndpointIdentificationAlgorithm(null);
                        engine.setSSLParameters(parameters);
                      });
                }
              });
    }
    this.http = http;
  }

  Upstream upstream() {
    return upstream;
  }

  UpstreamTls tls() {
    return tls;
  }

  /** {@code redirect.max-hops}: redirects followed per request, at least 0. */
  int maxRedirectHops() {
    return maxRedirectHops;
  }

  /**
   * The upstream's configured client: its pool, event loops, TLS, timeouts and address policy;
   * redirects not followed, no compression asked for.
   */
  HttpClient httpClient() {
    return http;
  }

  /**
   * A {@link WebClient} over {@link #httpClient()}, for token requests; built on first use, so an
   * upstream that never asks for a token never loads WebClient.
   */
  WebClient webClient() {
    WebClient built = webClient;
    if (built == null) {
      synchronized (this) {
        built = webClient;
        if (built == null) {
          built = WebClient.builder().clientConnector(new ReactorClientHttpConnector(http)).build();
          webClient = built;
        }
      }
    }
    return built;
  }

  /**
   * One HTTP exchange on Reactor Netty's {@link HttpClient}, as Spring's {@code
   * ReactorClientHttpConnector} and {@code ReactorClientHttpResponse} make it: the reply comes with
   * the response headers (Netty's, adapted without a copy); its body is the connection's inbound
   * buffers, each retained and wrapped, and may be subscribed once. A reply cancelled before its
   * body was subscribed has the body read and dropped, so the connection goes back to the pool.
   * Transport failures come out as Reactor Netty raises them (see {@link TransportFailure}).
   *
   * @param sent the {@code Authorization} sent, or {@code null}
   * @param sameOrigin whether {@code uri} is on the upstream's own origin
   * @param attempt where the reply's body is noted, for {@link Attempt#releaseUnlessHandedOn}
   */
  Mono<UpstreamCaller.Reply> exchange(
      HttpMethod method,
      URI uri,
      UpstreamCaller.Request request,
      String userAgent,
      UpstreamAuthorization sent,
      boolean sameOrigin,
      Attempt attempt) {
    return http.headers(
            h -> {
              h.set(HttpHeaderNames.USER_AGENT, userAgent);
              if (request.accept() != null && !request.accept().isEmpty()) {
                h.set(HttpHeaderNames.ACCEPT, String.join(", ", request.accept()));
              }
              if (sent != null) {
                h.set(HttpHeaderNames.AUTHORIZATION, sent.header());
              }
              if (request.range() != null) {
                h.set(HttpHeaderNames.RANGE, request.range());
              }
            })
        .request(io.netty.handler.codec.http.HttpMethod.valueOf(method.name()))
        .uri(uri)
        .responseConnection(
            (response, exchange) -> {
              int status = response.status().code();
              HttpHeaders headers =
                  HttpHeaders.readOnlyHttpHeaders(
                      new Netty4HeadersAdapter(response.responseHeaders()));
              NettyBody body = new NettyBody(exchange, mayHaveBody(method, status, headers));
              attempt.add(body);
              return Mono.just(
                  new UpstreamCaller.Reply(
                      status, headers, minTransferRate(body.flux()), sent, sameOrigin));
            })
        .next();
  }

  /** Whether a response may carry a body (RFC 9110 sections 6.4.1, 15.3.5 and 15.3.6). */
  private static boolean mayHaveBody(HttpMethod method, int status, HttpHeaders headers) {
    return !(status / 100 == 1
        || status == 204
        || status == 205
        || HttpMethod.HEAD.equals(method)
        || headers.getContentLength() == 0);
  }

  /**
   * The reply bodies of one attempt (the first request, a redirect's, a challenge's), so that those
   * nobody subscribed to are released when the attempt ends without handing a result on.
   */
  static final class Attempt {
    private final List<NettyBody> bodies = new ArrayList<>(2);
    private boolean handedOn;

    private synchronized void add(NettyBody body) {
      bodies.add(body);
    }

    /** A result (which may carry a body still to be read) went on to the caller. */
    synchronized void handedOn() {
      handedOn = true;
    }

    void releaseUnlessHandedOn() {
      List<NettyBody> unread;
      synchronized (this) {
        if (handedOn) {
          return;
        }
        unread = List.copyOf(bodies);
      }
      unread.forEach(NettyBody::releaseUnsubscribed);
    }
  }

  /**
   * The body of one reply: the connection's inbound buffers, subscribed at most once, or released
   * when nobody did (the states of Spring's {@code ReactorClientHttpResponse}).
   */
  private static final class NettyBody {
    private static final int UNSUBSCRIBED = 0;
    private static final int SUBSCRIBED = 1;
    private static final int RELEASED = 2;

    private final NettyInbound inbound;
    private final NettyDataBufferFactory buffers;
    private final boolean mayHaveBody;
    private final AtomicInteger state = new AtomicInteger(UNSUBSCRIBED);

    NettyBody(Connection connection, boolean mayHaveBody) {
      this.inbound = connection.inbound();
      this.buffers = new NettyDataBufferFactory(connection.outbound().alloc());
      this.mayHaveBody = mayHaveBody;
    }

    Flux<DataBuffer> flux() {
      return inbound
          .receive()
          .doOnSubscribe(
              s -> {
                if (!state.compareAndSet(UNSUBSCRIBED, SUBSCRIBED) && state.get() == RELEASED) {
                  throw new IllegalStateException(
                      "the upstream reply's body was released already, unread");
                }
              })
          .map(buf -> buffers.wrap(buf.retain()));
    }

    /**
     * Reads and drops the body when nobody subscribed to it, once: up to {@value
     * UpstreamCaller#DRAIN_BYTES} bytes, so a small body leaves the connection in the pool; a
     * larger one is cut off (Reactor Netty closes that connection) rather than read to its end, as
     * {@link UpstreamCaller#drain} does.
     */
    void releaseUnsubscribed() {
      if (mayHaveBody && state.compareAndSet(UNSUBSCRIBED, RELEASED)) {
        AtomicLong read = new AtomicLong();
        inbound
            .receive()
            .takeWhile(buf -> read.addAndGet(buf.readableBytes()) <= UpstreamCaller.DRAIN_BYTES)
            .subscribe(buf -> {}, e -> {});
      }
    }
  }

  /**
   * One tick a second for every body's rate check, from one timer shared by all the bodies being
   * received (a timer per body costs a scheduled task and a thread hop per blob); it stops while no
   * body is received.
   */
  private static final Flux<Long> RATE_CHECKS =
      Flux.interval(Duration.ofSeconds(1), Duration.ofSeconds(1)).share();

  /**
   * {@code body}, failing with {@link TransportFailure.SlowTransferException} once its average rate
   * since the response headers falls below {@code min-transfer-rate} after {@code
   * min-transfer-rate-grace}: a body dripping a byte now and then passes the idle {@code
   * read-timeout} but not this. After {@code n} bytes the next {@code n} are due by {@code grace +
   * n / rate} from the start. Checked once a second ({@link #RATE_CHECKS}), not per buffer.
   */
  private Flux<DataBuffer> minTransferRate(Flux<DataBuffer> body) {
    long rate = minTransferRate;
    if (rate <= 0) {
      return body;
    }
    Duration grace = minTransferRateGrace;
    String key = upstream.key();
    return Flux.defer(
        () -> {
          long start = System.nanoTime();
          AtomicLong received = new AtomicLong();
          Mono<Void> tooSlow =
              RATE_CHECKS
                  .filter(
                      tick ->
                          System.nanoTime() - start
                              > grace.toNanos() + received.get() * 1_000_000_000L / rate)
                  .next()
                  .flatMap(
                      tick ->
                          Mono.<Void>error(
                              new TransportFailure.SlowTransferException(
                                  "body slower than min-transfer-rate "
                                      + rate
                                      + " bytes/s: "
                                      + received.get()
                                      + " bytes in "
                                      + Duration.ofNanos(System.nanoTime() - start).toMillis()
                                      + " ms"
                                      + " (registry-cache.upstreams."
                                      + key
                                      + ".min-transfer-rate)")));
          return body.doOnNext(buffer -> received.addAndGet(buffer.readableByteCount()))
              .takeUntilOther(tooSlow)
              .doOnDiscard(DataBuffer.class, DataBufferUtils::release);
        });
  }

  @Override
  public void close() {
    pool.disposeLater().block(Duration.ofSeconds(5));
  }
}
