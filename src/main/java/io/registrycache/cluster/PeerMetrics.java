package io.registrycache.cluster;

import io.micrometer.core.instrument.Counter;
import io.micrometer.core.instrument.MeterRegistry;
import java.util.EnumMap;
import java.util.Locale;
import java.util.Map;
import org.springframework.stereotype.Component;

/**
 * The meters of blob and manifest requests between replicas, each registered once at start-up:
 *
 * <ul>
 *   <li>{@code registry_cache_peer_requests_total{direction,outcome}} — {@code direction="out"}:
 *       this replica asked a blob's owner, {@code outcome} {@code ok} (the owner streamed it: one
 *       upstream fetch avoided here, the "duplicate fills avoided"), {@code not_found} (the owner's
 *       upstream has no such blob) or {@code failed} (unreachable, an error status, or broken off
 *       mid-body: see the fallbacks); {@code direction="in"}: a peer asked this replica, {@code
 *       outcome} {@code ok}, {@code not_found}, {@code error} or {@code unauthorized} (wrong or
 *       missing token)
 *   <li>{@code registry_cache_peer_fallbacks_total{reason}} — a replica fetched a blob it does not
 *       own from the upstream itself because the owner could not give it: {@code unreachable} (no
 *       connection, no answer in time), {@code error_status} (the owner answered with an error
 *       before the body), {@code broken_body} (the owner's body broke off; the rest comes from the
 *       upstream)
 *   <li>{@code registry_cache_peer_suspicions_total{reason}} — a member was left out of ownership
 *       for {@code cluster.suspect-for} (counted when its suspicion starts, not again while it
 *       lasts): {@code unreachable} (its connection was refused or timed out) or {@code silent} (it
 *       accepted the request but neither answered it within {@code cluster.first-byte-timeout} nor
 *       a liveness probe within as long again: a hung process)
 * </ul>
 */
@Component
@ConditionalOnCluster
public class PeerMetrics {

  /** Which way a peer request went, seen from this replica. */
  public enum Direction {
    IN,
    OUT
  }

  /** How a peer request ended. */
  public enum Outcome {
    OK,
    NOT_FOUND,
    FAILED,
    ERROR,
    UNAUTHORIZED
  }

  /** Why a replica fetched a blob it does not own from the upstream. */
  public enum FallbackReason {
    UNREACHABLE,
    ERROR_STATUS,
    BROKEN_BODY
  }

  /** Why a member was suspected. */
  public enum SuspicionReason {
    UNREACHABLE,
    SILENT
  }

  private final Map<Direction, Map<Outcome, Counter>> requests = new EnumMap<>(Direction.class);
  private final Map<FallbackReason, Counter> fallbacks = new EnumMap<>(FallbackReason.class);
  private final Map<SuspicionReason, Counter> suspicions = new EnumMap<>(SuspicionReason.class);

  public PeerMetrics(MeterRegistry registry) {
    for (Direction direction : Direction.values()) {
      Map<Outcome, Counter> byOutcome = new EnumMap<>(Outcome.class);
      for (Outcome outcome : Outcome.values()) {
        byOutcome.put(
            outcome,
            Counter.builder("registry.cache.peer.requests")
                .description(
                    "Blob and manifest requests between replicas (direction: out = asked the owner, in = asked by a peer)")
                .tag("direction", lower(direction))
                .tag("outcome", lower(outcome))
                .register(registry));
      }
      requests.put(direction, byOutcome);
    }
    for (FallbackReason reason : FallbackReason.values()) {
      fallbacks.put(
          reason,
          Counter.builder("registry.cache.peer.fallbacks")
              .description(
                  "Blobs and manifests fetched from the upstream by a replica that does not own them, the owner failing")
              .tag("reason", lower(reason))
              .register(registry));
    }
    for (SuspicionReason reason : SuspicionReason.values()) {
      suspicions.put(
          reason,
          Counter.builder("registry.cache.peer.suspicions")
              .description(
                  "Members left out of ownership for cluster.suspect-for (unreachable, or silent: accepted a request and answered nothing)")
              .tag("reason", lower(reason))
              .register(registry));
    }
  }

  /** Counts one peer request. */
  public void request(Direction direction, Outcome outcome) {
    requests.get(direction).get(outcome).increment();
  }

  /** Counts one fallback to the upstream. */
  public void fallback(FallbackReason reason) {
    fallbacks.get(reason).increment();
  }

  /** Counts one member newly suspected. */
  public void suspicion(SuspicionReason reason) {
    suspicions.get(reason).increment();
  }

  /** The count so far of suspicions for {@code reason}. */
  public long suspicions(SuspicionReason reason) {
    return (long) suspicions.get(reason).count();
  }

  /** The count so far of peer requests, for health and tests. */
  public long requests(Direction direction, Outcome outcome) {
    return (long) requests.get(direction).get(outcome).count();
  }

  /** The count so far of fallbacks for {@code reason}. */
  public long fallbacks(FallbackReason reason) {
    return (long) fallbacks.get(reason).count();
  }

  private static String lower(Enum<?> value) {
    return value.name().toLowerCase(Locale.ROOT);
  }
}
