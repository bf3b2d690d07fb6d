package io.registrycache.peer;

import io.registrycache.cluster.ClusterMembership;
import io.registrycache.cluster.ClusterProperties;
import io.registrycache.cluster.ConditionalOnCluster;
import java.time.Duration;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import org.springframework.beans.factory.annotation.Value;
import org.springframework.context.SmartLifecycle;
import org.springframework.http.server.reactive.HttpHandler;
import org.springframework.http.server.reactive.ReactorHttpHandlerAdapter;
import org.springframework.stereotype.Component;
import org.springframework.web.reactive.function.server.RequestPredicates;
import org.springframework.web.reactive.function.server.RouterFunctions;
import reactor.netty.DisposableServer;
import reactor.netty.http.server.HttpServer;
import reactor.netty.resources.LoopResources;

/**
 * The internal port of a replica, {@code registry-cache.cluster.peer-port} (default 8082): a
 * Reactor Netty server of its own, apart from the pull port and the management port, bound only
 * when a cluster is configured. It serves {@link PeerEndpoint} and nothing else, on event loops of
 * its own ({@code peer-server-*}) so closing it never touches another server's.
 *
 * <p>The peer port speaks plain HTTP; the shared token authenticates. Keep it reachable only from
 * the other replicas: bind it to a private network's address ({@code
 * registry-cache.cluster.peer-address}), and/or a NetworkPolicy; see docs/scale-out.md.
 */
@Component
@ConditionalOnCluster
public class PeerServer implements SmartLifecycle {

  private static final Logger log = LoggerFactory.getLogger(PeerServer.class);

  private final ClusterMembership membership;
  private final ClusterProperties properties;
  private final PeerEndpoint endpoint;
  private volatile LoopResources loops;
  private volatile DisposableServer server;

  private final String address;

  /**
   * @param serverAddress the pull port's {@code server.address}: the peer port's address when
   *     {@code cluster.peer-address} is unset (empty: every interface)
   */
  public PeerServer(
      ClusterMembership membership,
      ClusterProperties properties,
      PeerEndpoint endpoint,
      @Value("${server.address:}") String serverAddress) {
    this.membership = membership;
    this.properties = properties;
    this.endpoint = endpoint;
    this.address =
        properties.peerAddress() != null
            ? properties.peerAddress()
            : serverAddress == null || serverAddress.isBlank() ? null : serverAddress;
  }

  @Override
  public void start() {
    if (!membership.enabled() || server != null) {
      return;
    }
    HttpHandler handler =
        RouterFunctions.toHttpHandler(
            RouterFunctions.route(RequestPredicates.all(), endpoint::handle));
    loops = LoopResources.create("peer-server", 1, 2, true);
    HttpServer http = HttpServer.create().port(properties.peerPort());
    if (address != null) {
      http = http.host(address);
    }
    server =
        http.runOn(loops)
            .handle(new ReactorHttpHandlerAdapter(handler))
            .bindNow(Duration.ofSeconds(10));
    log.info("peer endpoint listening on {} (members: {})", server.address(), membership.members());
  }

  @Override
  public void stop() {
    DisposableServer s = server;
    if (s != null) {
      s.disposeNow(Duration.ofSeconds(5));
      server = null;
    }
    LoopResources l = loops;
    if (l != null) {
      l.disposeLater(Duration.ZERO, Duration.ofSeconds(2)).block(Duration.ofSeconds(5));
      loops = null;
    }
  }

  @Override
  public boolean isRunning() {
    return server != null;
  }

  /**
   * After the blob service has started ({@code DEFAULT_PHASE - 4096}) and before the start-up
   * warm-up ({@code startup.StartupWarmUp}, {@code DEFAULT_PHASE - 3072}) and the pull port: the
   * other replicas reach this one as the owner of its blobs while it still warms up, instead of
   * finding its peer port closed, suspecting it and fetching its blobs from the upstream
   * themselves. On shutdown it stops after the pull port has drained.
   */
  @Override
  public int getPhase() {
    return SmartLifecycle.DEFAULT_PHASE - 3584;
  }

  /**
   * The event loops of the peer port (accepting and serving), null when not running; for tests in
   * this package that stop them to play a hung replica.
   */
  LoopResources loops() {
    return loops;
  }

  /** The port bound, or -1 when not running. */
  public int port() {
    DisposableServer s = server;
    return s == null ? -1 : s.port();
  }
}
