package io.registrycache.cluster;

import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.util.Collection;
import java.util.Optional;

/**
 * Picks the owner of a key (a blob digest, a manifest reference) among the live members by
 * rendezvous (highest random weight) hashing: every member scores every key, the highest score owns
 * it. Members that agree on the member set agree on the owner without talking to each other;
 * removing a member moves only the keys it owned, adding one moves only the keys it now owns
 * (Thaler and Ravishankar, "Using name-based mappings to increase hit rates", 1998).
 *
 * <p>The score is the first 8 bytes of SHA-256 over {@code member id, '\n', key}: stable across
 * JVMs and releases, which {@code String.hashCode} mixing would not promise to be.
 */
public final class RendezvousHashing {

  private RendezvousHashing() {}

  /**
   * The owner of {@code key}: empty only when {@code members} is empty. Ties (a 2^-64 chance) go to
   * the member with the smaller id, so the answer is still the same everywhere.
   */
  public static Optional<Member> owner(String key, Collection<Member> members) {
    Member best = null;
    long bestScore = 0;
    for (Member member : members) {
      long score = score(member, key);
      if (best == null
          || Long.compareUnsigned(score, bestScore) > 0
          || (score == bestScore && member.compareTo(best) < 0)) {
        best = member;
        bestScore = score;
      }
    }
    return Optional.ofNullable(best);
  }

  static long score(Member member, String key) {
    MessageDigest sha256 = sha256();
    sha256.update(member.id().getBytes(StandardCharsets.UTF_8));
    sha256.update((byte) '\n');
    sha256.update(key.getBytes(StandardCharsets.UTF_8));
    return ByteBuffer.wrap(sha256.digest()).getLong();
  }

  private static MessageDigest sha256() {
    try {
      return MessageDigest.getInstance("SHA-256");
    } catch (NoSuchAlgorithmException e) {
      throw new IllegalStateException("SHA-256 is required of every Java platform", e);
    }
  }
}
