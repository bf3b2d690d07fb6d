package io.registrycache.upstream;

import com.github.benmanes.caffeine.cache.Ticker;
import io.micrometer.core.instrument.MeterRegistry;
import io.registrycache.oci.Digest;
import io.registrycache.oci.Reference;
import io.registrycache.oci.RepositoryName;
import io.registrycache.tracing.PullTracing;
import java.net.URI;
import java.util.Collection;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Set;
import java.util.function.Supplier;
import org.springframework.beans.factory.DisposableBean;
import org.springframework.beans.factory.ObjectProvider;
import org.springframework.beans.factory.annotation.Autowired;
import org.springframework.context.EnvironmentAware;
import org.springframework.core.env.Environment;
import org.springframework.stereotype.Component;
import reactor.core.publisher.Mono;

/**
 * {@link UpstreamClient} on Reactor Netty's {@code HttpClient} (token requests alone go through
 * Spring's {@code WebClient}, in {@link WebClientTokenProvider}): one small class per registry
 * endpoint ({@link ManifestPuller}, {@link BlobPuller}, {@link TagLister}, {@link ReferrersLister})
 * over one {@link UpstreamCaller}, which owns connections, authentication (tokens from {@link
 * WebClientTokenProvider}, credentials from jib-core's public API, see {@code docs/jib-core.md}),
 * redirects, retries and metrics, as jib-core's {@code registry/} package does.
 *
 * <p>Per upstream: one connection pool with the upstream's TLS, {@code connect-timeout}, {@code
 * read-timeout} (between two reads) and {@code max-concurrent-requests} ({@link
 * UpstreamConnection}). Every request runs behind the upstream's circuit breaker and is retried
 * after transient failures, up to the response headers, never in the middle of a blob body ({@link
 * UpstreamResilience}, {@code docs/resilience.md}).
 *
 * <p>Metrics: timer {@code registry.cache.upstream.request{upstream,kind,outcome}} (per attempt),
 * counter {@code registry.cache.upstream.fetched.bytes{upstream}} ({@link UpstreamMetrics}).
 */
@Component
public class ReactorNettyUpstreamClient
    implements UpstreamClient, DisposableBean, EnvironmentAware {

  /** {@code User-Agent} of every upstream request, token requests included. */
  public static final String USER_AGENT = "registry-cache";

  private final UpstreamCaller caller;
  private final ManifestPuller manifests;
  private final BlobPuller blobs;
  private final TagLister tags;
  private final ReferrersLister referrers;

  /**
   * Builds the connection pools of all configured upstreams now, so that unreadable TLS files or
   * half-configured credentials fail the start-up.
   *
   * @throws IllegalStateException naming the setting that is wrong
   */
  @Autowired
  public ReactorNettyUpstreamClient(
      Upstreams upstreams,
      MeterRegistry meterRegistry,
      UpstreamResilience resilience,
      ObjectProvider<PullTracing> tracing) {
    this(
        upstreams,
        meterRegistry,
        resilience,
        Ticker.systemTicker(),
        tracing.getIfAvailable(PullTracing::off).enabled());
  }

  /** As above, its requests traced when a request's context holds a span. */
  public ReactorNettyUpstreamClient(
      Upstreams upstreams, MeterRegistry meterRegistry, UpstreamResilience resilience) {
    this(upstreams, meterRegistry, resilience, Ticker.systemTicker(), true);
  }

  /** As the public constructor, with {@code tokenTicker} timing token reuse (tests move it). */
  ReactorNettyUpstreamClient(
      Upstreams upstreams,
      MeterRegistry meterRegistry,
      UpstreamResilience resilience,
      Ticker tokenTicker) {
    this(upstreams, meterRegistry, resilience, tokenTicker, true);
  }

  private ReactorNettyUpstreamClient(
      Upstreams upstreams,
      MeterRegistry meterRegistry,
      UpstreamResilience resilience,
      Ticker tokenTicker,
      boolean traced) {
    this.caller = new UpstreamCaller(meterRegistry, resilience, USER_AGENT, tokenTicker, traced);
    this.manifests = new ManifestPuller(caller);
    this.blobs = new BlobPuller(caller);
    this.tags = new TagLister(caller);
    this.referrers = new ReferrersLister(caller);
    if (upstreams != null) {
      upstreams.all().forEach(caller::connection);
    }
  }

  /** With its own {@link UpstreamResilience}; for tests that build a client alone. */
  ReactorNettyUpstreamClient(Upstreams upstreams, MeterRegistry meterRegistry) {
    this(upstreams, meterRegistry, new UpstreamResilience(upstreams, meterRegistry));
  }

  /** Reads the cache's own ports (never a redirect or realm target) from the environment. */
  @Override
  public void setEnvironment(Environment environment) {
    ownPorts(
        () -> {
          Set<Integer> ports = new LinkedHashSet<>();
          for (String property :
              List.of(
                  "local.server.port",
                  "local.management.port",
                  "server.port",
                  "management.server.port")) {
            Integer port = environment.getProperty(property, Integer.class);
            if (port != null && port > 0) {
              ports.add(port);
            }
          }
          // The internal peer endpoint of a scaled-out cache (docs/scale-out.md), when one is
          // configured.
          if (environment.containsProperty("registry-cache.cluster.peers[0]")
              || environment.containsProperty("registry-cache.cluster.peers")
              || environment.containsProperty("registry-cache.cluster.peers-dns")) {
            ports.add(
                environment.getProperty("registry-cache.cluster.peer-port", Integer.class, 8082));
          }
          return ports;
        });
  }

  /** The cache's own ports, which redirects and token realms may never reach on a local address. */
  void ownPorts(Supplier<Collection<Integer>> ports) {
    caller.ownPorts(ports);
  }

  @Override
  public Mono<UpstreamManifest> getManifest(
      Upstream upstream,
      RepositoryName name,
      Reference reference,
      List<String> accept,
      int maxBytes) {
    return manifests.get(upstream, name, reference, accept, maxBytes);
  }

  @Override
  public Mono<UpstreamManifestHead> headManifest(
      Upstream upstream, RepositoryName name, Reference reference, List<String> accept) {
    return manifests.head(upstream, name, reference, accept);
  }

  @Override
  public Mono<UpstreamBlob> getBlob(Upstream upstream, RepositoryName name, Digest digest) {
    return blobs.get(upstream, name, digest, 0);
  }

  @Override
  public Mono<UpstreamBlob> getBlob(
      Upstream upstream, RepositoryName name, Digest digest, long offset) {
    return blobs.get(upstream, name, digest, offset);
  }

  @Override
  public Mono<Long> headBlob(Upstream upstream, RepositoryName name, Digest digest) {
    return blobs.head(upstream, name, digest);
  }

  @Override
  public Mono<UpstreamTags> listTags(
      Upstream upstream, RepositoryName name, Integer n, String last) {
    return tags.list(upstream, name, n, last);
  }

  @Override
  public Mono<UpstreamReferrers> listReferrers(
      Upstream upstream, RepositoryName name, Digest subject, URI page) {
    return referrers.list(upstream, name, subject, page);
  }

  /** Closes every connection pool and the authentication scheduler. */
  @Override
  public void destroy() {
    caller.close();
  }
}
