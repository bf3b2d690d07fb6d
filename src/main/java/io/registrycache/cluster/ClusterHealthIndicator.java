package io.registrycache.cluster;

import java.util.LinkedHashMap;
import java.util.Map;
import org.springframework.boot.health.contributor.Health;
import org.springframework.boot.health.contributor.HealthIndicator;
import org.springframework.stereotype.Component;

/**
 * Health contributor {@code cluster}: the members this replica sees, which one it is, and when they
 * were last resolved, its peer port, and how many blobs it fetched from the upstream because their
 * owner failed ({@link PeerMetrics}). Always {@code UP} (a replica alone still serves pulls); a
 * failed DNS lookup shows as {@code lastError}. {@code mode: single} when no cluster is configured.
 */
@Component
@ConditionalOnCluster
public class ClusterHealthIndicator implements HealthIndicator {

  private final ClusterMembership membership;
  private final ClusterProperties properties;
  private final PeerMetrics metrics;

  public ClusterHealthIndicator(
      ClusterMembership membership, ClusterProperties properties, PeerMetrics metrics) {
    this.membership = membership;
    this.properties = properties;
    this.metrics = metrics;
  }

  @Override
  public Health health() {
    if (!membership.enabled()) {
      return Health.up().withDetail("mode", "single").build();
    }
    ClusterMembership.View view = membership.view();
    Map<String, Object> details = new LinkedHashMap<>();
    details.put("mode", "replicas");
    details.put("members", view.members().stream().map(Member::id).toList());
    details.put("self", view.self().map(Member::id).orElse("not recognised"));
    details.put("resolvedAt", view.resolvedAt().toString());
    view.lastError().ifPresent(e -> details.put("lastError", e));
    details.put("suspects", membership.suspects().stream().map(Member::id).toList());
    details.put("peerPort", properties.peerPort());
    long fallbacks = 0;
    for (PeerMetrics.FallbackReason reason : PeerMetrics.FallbackReason.values()) {
      fallbacks += metrics.fallbacks(reason);
    }
    details.put("ownerFallbacks", fallbacks);
    return Health.up().withDetails(details).build();
  }
}
