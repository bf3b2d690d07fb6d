package io.registrycache.cluster;

import static org.assertj.core.api.Assertions.assertThat;

import io.registrycache.testsupport.Generated;
import java.util.ArrayList;
import java.util.Collections;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeSet;
import java.util.stream.Stream;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.Arguments;
import org.junit.jupiter.params.provider.MethodSource;

/** Ownership of keys among replicas: agreed, stable when the membership changes, spread evenly. */
class RendezvousHashingTest {

  static List<Member> members(int n) {
    List<Member> members = new ArrayList<>();
    for (int i = 0; i < n; i++) {
      members.add(new Member("10.0.0." + (i + 1), 5000));
    }
    return members;
  }

  /**
   * 1,000 keys (1 to 80 characters of any kind) with a member count of 1 to 9 and a member index of
   * 0 to 8.
   */
  static Stream<Arguments> keysAndCounts() {
    return Generated.values(
        20_261, 1000, r -> Arguments.of(Generated.any(r, 1, 80), 1 + r.nextInt(9), r.nextInt(9)));
  }

  @ParameterizedTest(name = "[{index}] {1} members")
  @MethodSource("keysAndCounts")
  void everyMemberOrderAgreesOnTheOwner(String key, int n, int unused) {
    List<Member> members = members(n);
    Member owner = RendezvousHashing.owner(key, members).orElseThrow();
    List<Member> reversed = new ArrayList<>(members);
    Collections.reverse(reversed);
    assertThat(RendezvousHashing.owner(key, reversed)).contains(owner);
    assertThat(RendezvousHashing.owner(key, new TreeSet<>(members))).contains(owner);
    assertThat(members).contains(owner);
  }

  @ParameterizedTest(name = "[{index}] {1} members, remove #{2}")
  @MethodSource("keysAndCounts")
  void removingAMemberMovesOnlyTheKeysItOwned(String key, int count, int removed) {
    int n = Math.max(2, count);
    List<Member> members = members(n);
    Member gone = members.get(removed % n);
    Member before = RendezvousHashing.owner(key, members).orElseThrow();
    List<Member> after = new ArrayList<>(members);
    after.remove(gone);
    Member now = RendezvousHashing.owner(key, after).orElseThrow();
    if (!before.equals(gone)) {
      assertThat(now).isEqualTo(before);
    } else {
      assertThat(now).isNotEqualTo(gone);
    }
  }

  @ParameterizedTest(name = "[{index}] {1} members")
  @MethodSource("keysAndCounts")
  void addingAMemberMovesKeysOnlyToIt(String key, int count, int unused) {
    List<Member> members = members(Math.min(8, count));
    Member before = RendezvousHashing.owner(key, members).orElseThrow();
    Member added = new Member("10.0.1.1", 5000);
    List<Member> grown = new ArrayList<>(members);
    grown.add(added);
    assertThat(RendezvousHashing.owner(key, grown).orElseThrow()).isIn(before, added);
  }

  @Test
  void digestsSpreadEvenlyOverThreeReplicas() {
    List<Member> members = members(3);
    Map<Member, Integer> owned = new HashMap<>();
    int keys = 30_000;
    for (int i = 0; i < keys; i++) {
      String digest = "sha256:" + String.format("%064x", i * 2_654_435_761L);
      owned.merge(RendezvousHashing.owner(digest, members).orElseThrow(), 1, Integer::sum);
    }
    // Each share is binomial(30000, 1/3): 10000 ± 82 (one standard deviation); ±5 % is > 6 sigma.
    assertThat(owned).hasSize(3);
    owned.values().forEach(count -> assertThat(count).isBetween(9_500, 10_500));
  }

  @Test
  void noMembersNoOwner() {
    assertThat(RendezvousHashing.owner("sha256:" + "0".repeat(64), List.of())).isEmpty();
  }

  @Test
  void theScoreIsPinnedAcrossReleases() {
    // Replicas of different versions must agree during a rolling update: the score is part of the
    // protocol. SHA-256("10.0.0.1:5000\nkey") begins with these 8 bytes.
    assertThat(String.format("%016x", RendezvousHashing.score(new Member("10.0.0.1", 5000), "key")))
        .isEqualTo("061ba2b19c3f7f79"); // printf '10.0.0.1:5000\nkey' | sha256sum | cut -c1-16
  }
}
