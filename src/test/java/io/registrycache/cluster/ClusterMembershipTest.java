package io.registrycache.cluster;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import io.registrycache.testsupport.TestCache.MutableClock;
import java.net.InetAddress;
import java.net.UnknownHostException;
import java.time.Clock;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Optional;
import java.util.TreeSet;
import java.util.concurrent.atomic.AtomicBoolean;
import org.junit.jupiter.api.Test;
import org.springframework.boot.context.properties.EnableConfigurationProperties;
import org.springframework.boot.test.context.runner.ApplicationContextRunner;
import org.springframework.context.annotation.Configuration;

/** Who is in the cluster: static peers, a DNS name's addresses, this replica among them. */
class ClusterMembershipTest {

  static ClusterProperties props(List<String> peers, String dns, String self) {
    return new ClusterProperties(peers, dns, 5000, Duration.ofSeconds(10), self);
  }

  static ClusterHealthIndicator health(ClusterMembership membership) {
    return new ClusterHealthIndicator(
        membership, props(List.of(), null, null), new PeerMetrics(new SimpleMeterRegistry()));
  }

  @Test
  void aSingleReplicaHasNoMembers() {
    ClusterMembership membership =
        new ClusterMembership(props(List.of(), null, null), Clock.systemUTC());
    assertThat(membership.enabled()).isFalse();
    assertThat(membership.members()).isEmpty();
    assertThat(health(membership).health().getDetails()).containsEntry("mode", "single");
  }

  @Test
  void staticPeersAreParsedSortedAndSelfIsRecognisedByLocalAddressAndPort() {
    ClusterMembership membership =
        new ClusterMembership(
            props(List.of("127.0.0.1:5001", "10.255.0.2", "127.0.0.1", "[::1]:5002"), null, null),
            Clock.systemUTC());
    assertThat(membership.members())
        .extracting(Member::id)
        .containsExactly("10.255.0.2:5000", "127.0.0.1:5000", "127.0.0.1:5001", "[::1]:5002");
    // Only 127.0.0.1:5000 is local *and* on peer-port.
    assertThat(membership.view().self()).contains(new Member("127.0.0.1", 5000));
  }

  @Test
  void theConfiguredSelfWins() {
    ClusterMembership membership =
        new ClusterMembership(
            props(List.of("a.test:5000", "b.test:5000"), null, "b.test:5000"), Clock.systemUTC());
    assertThat(membership.view().self()).contains(new Member("b.test", 5000));
  }

  @Test
  void aDnsNameIsResolvedToItsAddressesOnThePeerPort() throws UnknownHostException {
    ClusterMembership membership =
        new ClusterMembership(props(List.of(), "localhost", null), Clock.systemUTC());
    List<String> expected =
        Arrays.stream(InetAddress.getAllByName("localhost"))
            .map(a -> new Member(a.getHostAddress(), 5000).id())
            .sorted()
            .toList();
    assertThat(expected).isNotEmpty();
    assertThat(membership.members()).extracting(Member::id).containsExactlyElementsOf(expected);
    assertThat(membership.view().lastError()).isEmpty();
    assertThat(health(membership).health().getDetails())
        .containsEntry("mode", "replicas")
        .containsEntry("members", expected)
        .containsEntry("ownerFallbacks", 0L);
  }

  @Test
  void aFailedLookupKeepsTheMembersLastSeen() {
    AtomicBoolean dnsDown = new AtomicBoolean(false);
    ClusterMembership membership =
        new ClusterMembership(
            props(List.of(), "peers.test", null),
            name -> {
              if (dnsDown.get()) {
                throw new UnknownHostException(name);
              }
              return new InetAddress[] {
                InetAddress.getByAddress(new byte[] {10, 0, 0, 1}),
                InetAddress.getByAddress(new byte[] {10, 0, 0, 2})
              };
            },
            Clock.systemUTC(),
            false);
    assertThat(membership.members())
        .extracting(Member::id)
        .containsExactly("10.0.0.1:5000", "10.0.0.2:5000");

    dnsDown.set(true);
    membership.refresh();
    assertThat(membership.members())
        .extracting(Member::id)
        .containsExactly("10.0.0.1:5000", "10.0.0.2:5000");
    assertThat(membership.view().lastError())
        .hasValueSatisfying(e -> assertThat(e).contains("peers.test"));

    dnsDown.set(false);
    membership.refresh();
    assertThat(membership.view().lastError()).isEmpty();
  }

  @Test
  void theOwnerElsewhereIsTheRendezvousOwnerUnlessItIsThisReplica() {
    List<String> peers = List.of("a.test:8082", "b.test:8082", "c.test:8082");
    ClusterMembership asB =
        new ClusterMembership(
            new ClusterProperties(peers, null, 8082, Duration.ofSeconds(10), "b.test:8082"),
            Clock.systemUTC());
    int elsewhere = 0;
    for (int i = 0; i < 300; i++) {
      String key = "sha256:" + String.format("%064x", i);
      Member owner = RendezvousHashing.owner(key, asB.members()).orElseThrow();
      if (owner.equals(new Member("b.test", 8082))) {
        assertThat(asB.ownerElsewhere(key)).as("b owns %s", key).isEmpty();
      } else {
        assertThat(asB.ownerElsewhere(key)).contains(owner);
        elsewhere++;
      }
    }
    assertThat(elsewhere)
        .as("about two thirds of 300 keys are owned by a or c")
        .isBetween(150, 250);
    ClusterMembership single =
        new ClusterMembership(props(List.of(), null, null), Clock.systemUTC());
    assertThat(single.ownerElsewhere("sha256:" + "0".repeat(64))).isEmpty();
    // Not recognised among the members: the owner is asked even if it may be this replica.
    ClusterMembership unknownSelf =
        new ClusterMembership(
            new ClusterProperties(List.of("a.test:8082"), null, 8082, Duration.ofSeconds(10), null),
            Clock.systemUTC());
    assertThat(unknownSelf.ownerElsewhere("k")).contains(new Member("a.test", 8082));
  }

  @Test
  void aSuspectMemberLeavesOwnershipForSuspectForThenComesBack() {
    MutableClock clock = new MutableClock();
    List<String> peers = List.of("a.test:8082", "b.test:8082", "c.test:8082");
    ClusterMembership asA =
        new ClusterMembership(
            new ClusterProperties(peers, null, 8082, Duration.ofSeconds(10), "a.test:8082"), clock);
    Member b = new Member("b.test", 8082);
    Member c = new Member("c.test", 8082);
    List<String> ownedByB = new ArrayList<>();
    for (int i = 0; i < 300; i++) {
      String key = "sha256:" + String.format("%064x", i);
      if (asA.ownerElsewhere(key).equals(Optional.of(b))) {
        ownedByB.add(key);
      }
    }
    assertThat(ownedByB).hasSizeBetween(50, 150);

    assertThat(asA.suspect(b)).as("a suspicion starts").isTrue();
    assertThat(asA.suspect(b)).as("already a suspect: not a new suspicion").isFalse();
    assertThat(asA.suspect(new Member("a.test", 8082))).isFalse(); // never itself
    assertThat(asA.suspects()).containsExactly(b);
    for (String key : ownedByB) {
      Member next =
          RendezvousHashing.owner(key, new TreeSet<>(List.of(new Member("a.test", 8082), c)))
              .orElseThrow();
      assertThat(asA.ownerElsewhere(key))
          .as("the next owner of %s", key)
          .isEqualTo(next.equals(c) ? Optional.of(c) : Optional.empty());
    }

    clock.advance(Duration.ofSeconds(10));
    assertThat(asA.suspects()).isEmpty();
    for (String key : ownedByB) {
      assertThat(asA.ownerElsewhere(key)).contains(b);
    }
  }

  @Test
  void aSuspectForOfZeroNeverSuspects() {
    ClusterMembership membership =
        new ClusterMembership(
            new ClusterProperties(
                List.of("a.test:8082", "b.test:8082"),
                null,
                8082,
                Duration.ofSeconds(10),
                "a.test:8082",
                null,
                null,
                Duration.ofSeconds(2),
                Duration.ofSeconds(60),
                Duration.ZERO,
                null),
            Clock.systemUTC());
    membership.suspect(new Member("b.test", 8082));
    assertThat(membership.suspects()).isEmpty();
  }

  @Test
  void theTokenNeverAppearsInThePropertiesText() {
    ClusterProperties p =
        new ClusterProperties(
            List.of("a.test"),
            null,
            8082,
            Duration.ofSeconds(10),
            null,
            "s3cret-s3cret-s3cret",
            null,
            Duration.ofSeconds(2),
            Duration.ofSeconds(60),
            Duration.ofSeconds(10),
            null);
    assertThat(p.toString()).doesNotContain("s3cret").contains("token=(set)");
  }

  @Test
  void memberAddressesAreValidated() {
    assertThat(Member.parse("[fd00::1]:7000", 5000)).isEqualTo(new Member("fd00::1", 7000));
    assertThat(Member.parse("fd00::1", 5000).id()).isEqualTo("[fd00::1]:5000");
    assertThatThrownBy(() -> Member.parse("host:http", 5000)).hasMessageContaining("not a number");
    assertThatThrownBy(() -> Member.parse("host:70000", 5000)).hasMessageContaining("out of range");
    assertThatThrownBy(() -> Member.parse("[fd00::1", 5000)).hasMessageContaining("unclosed");
    assertThatThrownBy(() -> new Member(" ", 5000)).isInstanceOf(IllegalArgumentException.class);
  }

  @Test
  void propertiesBindFromTheEnvironmentAndABadPeerFailsAtStartUp() {
    ApplicationContextRunner runner =
        new ApplicationContextRunner().withUserConfiguration(Config.class);
    runner
        .withPropertyValues(
            "registry-cache.cluster.peers=a.test:5000,b.test",
            "registry-cache.cluster.peer-port=6000",
            "registry-cache.cluster.refresh-interval=30s")
        .run(
            context -> {
              ClusterProperties p = context.getBean(ClusterProperties.class);
              assertThat(p.peers()).containsExactly("a.test:5000", "b.test");
              assertThat(p.peerPort()).isEqualTo(6000);
              assertThat(p.refreshInterval()).isEqualTo(Duration.ofSeconds(30));
              assertThat(p.enabled()).isTrue();
            });
    runner.run(
        context -> {
          ClusterProperties p = context.getBean(ClusterProperties.class);
          assertThat(p.enabled()).isFalse();
          assertThat(p.peerPort()).isEqualTo(8082);
          assertThat(p.refreshInterval()).isEqualTo(Duration.ofSeconds(10));
          assertThat(p.connectTimeout()).isEqualTo(Duration.ofSeconds(2));
          assertThat(p.readTimeout()).isEqualTo(Duration.ofSeconds(60));
          assertThat(p.token()).isNull();
        });
    runner
        .withPropertyValues("registry-cache.cluster.peers=a.test:http")
        .run(
            context ->
                assertThat(context)
                    .hasFailed()
                    .getFailure()
                    .rootCause()
                    .hasMessageContaining("not a number"));
  }

  @Configuration(proxyBeanMethods = false)
  @EnableConfigurationProperties(ClusterProperties.class)
  static class Config {}
}
