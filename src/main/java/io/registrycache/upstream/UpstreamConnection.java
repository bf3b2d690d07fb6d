package io.registrycache.upstream;

import io.netty.channel.AdaptiveRecvByteBufAllocator;
import io.netty.channel.ChannelOption;
import io.registrycache.config.UpstreamProperties;
import java.time.Duration;
import javax.net.ssl.SSLEngine;
import javax.net.ssl.SSLParameters;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import org.springframework.http.client.reactive.ReactorClientHttpConnector;
import org.springframework.web.reactive.function.client.WebClient;
import reactor.netty.http.HttpResources;
import reactor.netty.http.client.HttpClient;
import reactor.netty.resources.ConnectionProvider;
import reactor.netty.resources.LoopResources;

/**
 * The HTTP side of one upstream: its own connection pool and Reactor Netty {@link HttpClient} with
 * the upstream's TLS, timeouts and concurrency bound. Registry requests (manifests, blobs, tags,
 * referrers) go out on the {@link HttpClient} itself ({@link UpstreamCaller}); token requests
 * ({@link WebClientTokenProvider}, rare) on a {@link WebClient} over the same client and pool.
 *
 * <ul>
 *   <li>{@code connect-timeout}: TCP connect ({@code CONNECT_TIMEOUT_MILLIS}).
 *   <li>{@code read-timeout}: Reactor Netty's response timeout, an idle timeout between two reads
 *       of a response (headers, then every body chunk), so a hanging upstream fails.
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

  /** {@code min-transfer-rate} in bytes per second; 0 when a body may be as slow as it likes. */
  long minTransferRate() {
    return minTransferRate;
  }

  /** {@code min-transfer-rate-grace}: how long a body may be slow from its start. */
  Duration minTransferRateGrace() {
    return minTransferRateGrace;
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

  @Override
  public void close() {
    pool.disposeLater().block(Duration.ofSeconds(5));
  }
}
