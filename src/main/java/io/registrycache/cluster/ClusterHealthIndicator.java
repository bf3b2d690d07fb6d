package io.registrycache.cluster;

import java.util.LinkedHashMap;
import java.util.Map;
import org.springframework.boot.health.contributor.Health;
import org.springframework.boot.health.contributor.HealthIndicator;
import org.springframework.stereotype.Component;

/**
 * Health contributor {@code cluster}: the members this replica sees, which one it is, and when
 * they were last resolved. Always {@code UP} (a replica alone still serves pulls); a failed DNS
 * lookup shows as {@code lastError}. {@code mode: single} when no cluster is configured.
 */
@Component
public class ClusterHealthIndicator implements HealthIndicator {

  private final ClusterMembership membership;

  public ClusterHealthIndicator(ClusterMembership membership) {
    this.membership = membership;
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
    return Health.up().withDetails(details).build();
  }
}
