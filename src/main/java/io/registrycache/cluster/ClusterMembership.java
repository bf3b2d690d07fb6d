package io.registrycache.cluster;

import jakarta.annotation.PreDestroy;
import java.net.InetAddress;
import java.net.NetworkInterface;
import java.net.SocketException;
import java.net.UnknownHostException;
import java.time.Clock;
import java.time.Instant;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Set;
import java.util.SortedSet;
import java.util.TreeSet;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicReference;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import org.springframework.beans.factory.annotation.Autowired;
import org.springframework.stereotype.Component;

/**
 * The members of the cluster as this replica sees them: the static {@code peers} plus the addresses
 * behind {@code peers-dns}, resolved at start-up and then every {@code refresh-interval} on one
 * daemon thread ({@code cluster-membership}; lookups block). A failed lookup keeps the members last
 * seen, so a DNS hiccup never reshuffles ownership.
 *
 * <p>Reads are lock-free snapshots: {@link #members()} is called per pull once ownership routes
 * requests between replicas.
 *
 * <p>A member this replica could not connect to, or that accepted a request and stayed silent
 * ({@link #suspect}), is left out of ownership for {@code suspect-for}: the blobs it owns get the
 * next owner by the same hashing (the one other replicas that also cannot reach it pick too),
 * instead of each miss waiting on a refused or black-holed connection first. It is taken back when
 * the time is up; no probing.
 */
@Component
@ConditionalOnCluster
public class ClusterMembership {

  private static final Logger log = LoggerFactory.getLogger(ClusterMembership.class);

  /** One view of the cluster. */
  public record View(
      SortedSet<Member> members,
      Optional<Member> self,
      Instant resolvedAt,
      Optional<String> lastError) {}

  /** Resolves a DNS name to its addresses; replaceable in tests of failure handling only. */
  @FunctionalInterface
  interface Resolver {
    InetAddress[] resolve(String name) throws UnknownHostException;
  }

  private final ClusterProperties properties;
  private final Resolver resolver;
  private final Clock clock;
  private final AtomicReference<View> view;
  private final ScheduledExecutorService refresher;

  /** Members left out of ownership, with the end of their suspicion. */
  private final Map<Member, Instant> suspects = new ConcurrentHashMap<>();

  @Autowired
  public ClusterMembership(ClusterProperties properties, Clock clock) {
    this(properties, InetAddress::getAllByName, clock, true);
  }

  @SuppressWarnings("FutureReturnValueIgnored") // refresh keeps the last members on a failed lookup
  ClusterMembership(
      ClusterProperties properties, Resolver resolver, Clock clock, boolean schedule) {
    this.properties = properties;
    this.resolver = resolver;
    this.clock = clock;
    this.view =
        new AtomicReference<>(
            new View(
                Collections.emptySortedSet(), Optional.empty(), clock.instant(), Optional.empty()));
    refresh();
    boolean dns = properties.peersDns() != null && !properties.peersDns().isBlank();
    if (schedule && dns) {
      refresher =
          Executors.newSingleThreadScheduledExecutor(
              r -> {
                Thread t = new Thread(r, "cluster-membership");
                t.setDaemon(true);
                return t;
              });
      long every = properties.refreshInterval().toMillis();
      refresher.scheduleWithFixedDelay(this::refresh, every, every, TimeUnit.MILLISECONDS);
    } else {
      refresher = null;
    }
  }

  /** Whether this service runs as one of several replicas. */
  public boolean enabled() {
    return properties.enabled();
  }

  /** The current view: members sorted by id, this replica among them when recognised. */
  public View view() {
    return view.get();
  }

  /** The current members, sorted by id; empty for a single replica. */
  public SortedSet<Member> members() {
    return view.get().members();
  }

  /**
   * The member that owns {@code key} (a blob digest) by {@link RendezvousHashing} over the current
   * members, when that is another replica; empty when there is no cluster, no member, or this
   * replica is the owner. When this replica is not recognised among the members, the owner is
   * returned even if it might be this replica: asking oneself costs a hop, not a pull.
   */
  public Optional<Member> ownerElsewhere(String key) {
    if (!enabled()) {
      return Optional.empty();
    }
    View current = view.get();
    SortedSet<Member> candidates = current.members();
    if (!suspects.isEmpty()) {
      Instant now = clock.instant();
      suspects.entrySet().removeIf(e -> !e.getValue().isAfter(now));
      if (!suspects.isEmpty()) {
        candidates = new TreeSet<>(candidates);
        candidates.removeAll(suspects.keySet());
      }
    }
    return RendezvousHashing.owner(key, candidates)
        .filter(owner -> current.self().map(self -> !self.equals(owner)).orElse(true));
  }

  /**
   * Leaves {@code member} out of ownership for {@code suspect-for} (a connection to it was refused
   * or timed out, or it accepted a request and stayed silent); no-op when that is 0 or the member
   * is this replica.
   *
   * @return whether this starts a suspicion (the member was not a suspect already)
   */
  public boolean suspect(Member member) {
    if (properties.suspectFor().isZero() || view.get().self().map(member::equals).orElse(false)) {
      return false;
    }
    Instant now = clock.instant();
    Instant previous = suspects.put(member, now.plus(properties.suspectFor()));
    if (previous == null || !previous.isAfter(now)) {
      log.warn(
          "cluster: member {} unreachable or silent; the blobs it owns go to the next owner for {}",
          member,
          properties.suspectFor());
      return true;
    }
    return false;
  }

  /** Members left out of ownership now. */
  public Set<Member> suspects() {
    Instant now = clock.instant();
    Set<Member> out = new TreeSet<>();
    suspects.forEach(
        (m, until) -> {
          if (until.isAfter(now)) {
            out.add(m);
          }
        });
    return out;
  }

  /** Resolves the members again now; a DNS failure keeps the previous members and is reported. */
  public void refresh() {
    SortedSet<Member> members = new TreeSet<>();
    for (String peer : properties.peers()) {
      members.add(Member.parse(peer, properties.peerPort()));
    }
    View previous = view.get();
    Optional<String> error = Optional.empty();
    String dns = properties.peersDns();
    if (dns != null && !dns.isBlank()) {
      try {
        for (InetAddress address : resolver.resolve(dns.strip())) {
          members.add(new Member(address.getHostAddress(), properties.peerPort()));
        }
      } catch (UnknownHostException | RuntimeException e) {
        error = Optional.of("lookup of " + dns + " failed: " + e);
        log.warn(
            "cluster: {}; keeping the {} members last seen",
            error.get(),
            previous.members().size());
        members.addAll(previous.members());
      }
    }
    SortedSet<Member> frozen = Collections.unmodifiableSortedSet(members);
    if (!frozen.equals(previous.members())) {
      log.info("cluster members: {}", frozen);
    }
    view.set(new View(frozen, self(frozen), clock.instant(), error));
  }

  private Optional<Member> self(SortedSet<Member> members) {
    if (properties.self() != null && !properties.self().isBlank()) {
      return Optional.of(Member.parse(properties.self(), properties.peerPort()));
    }
    List<Member> local = new ArrayList<>();
    for (Member m : members) {
      if (m.port() == properties.peerPort() && isLocal(m.host())) {
        local.add(m);
      }
    }
    return local.size() == 1 ? Optional.of(local.get(0)) : Optional.empty();
  }

  private static boolean isLocal(String host) {
    try {
      InetAddress address = InetAddress.getByName(host);
      return address.isLoopbackAddress() || NetworkInterface.getByInetAddress(address) != null;
    } catch (UnknownHostException | SocketException e) {
      return false;
    }
  }

  @PreDestroy
  void stop() {
    if (refresher != null) {
      refresher.shutdownNow();
    }
  }
}
