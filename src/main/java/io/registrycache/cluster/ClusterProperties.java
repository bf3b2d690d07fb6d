package io.registrycache.cluster;

import java.time.Duration;
import java.util.List;
import org.springframework.boot.context.properties.ConfigurationProperties;
import org.springframework.boot.context.properties.bind.DefaultValue;

/**
 * {@code registry-cache.cluster.*}: the replicas of a scaled-out cache (issue 11). With neither
 * {@code peers} nor {@code peers-dns} set (the default) the service is a single replica and
 * nothing here is used.
 *
 * @param peers static members, {@code host:port} or {@code [v6]:port} (a bare host gets {@code
 *     peer-port}); may include this replica
 * @param peersDns a DNS name whose A/AAAA records are the members (a Kubernetes headless
 *     Service), each on {@code peer-port}; resolved at start-up and every {@code refresh-interval}
 * @param peerPort port of members given without one and of the addresses behind {@code peers-dns}
 * @param refreshInterval how often {@code peers-dns} is resolved again; a failed lookup keeps the
 *     last members seen
 * @param self this replica's own {@code host:port} as the others reach it; when unset, the member
 *     whose address belongs to a local network interface and whose port is {@code peer-port}
 */
@ConfigurationProperties("registry-cache.cluster")
public record ClusterProperties(
    @DefaultValue List<String> peers,
    String peersDns,
    @DefaultValue("5000") int peerPort,
    @DefaultValue("10s") Duration refreshInterval,
    String self) {

  public ClusterProperties {
    peers = List.copyOf(peers);
    if (peerPort < 1 || peerPort > 65_535) {
      throw new IllegalArgumentException("registry-cache.cluster.peer-port out of range: " + peerPort);
    }
    if (refreshInterval.isNegative() || refreshInterval.isZero()) {
      throw new IllegalArgumentException("registry-cache.cluster.refresh-interval must be positive: " + refreshInterval);
    }
    peers.forEach(p -> Member.parse(p, peerPort)); // fail at start-up, not at the first pull
  }

  /** Whether more than one replica is configured: a static list or a DNS name. */
  public boolean enabled() {
    return !peers.isEmpty() || (peersDns != null && !peersDns.isBlank());
  }
}
