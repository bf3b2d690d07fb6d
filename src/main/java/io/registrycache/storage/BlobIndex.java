package io.registrycache.storage;

import io.registrycache.oci.Digest;
import java.time.Instant;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicLong;
import java.util.function.BiConsumer;
import java.util.function.Predicate;

/**
 * The in-memory index of stored blobs, the same for every store: digest → {@link Entry} (size, when
 * stored, when last pulled) and the total of their sizes. A hit reads it without a lock; every
 * change of one digest runs under the map's lock for that digest, so a store can do its file-system
 * or bucket step for a digest atomically with the index change ({@link #locked}, {@link
 * #ifAbsent}).
 */
public final class BlobIndex {

  /** One stored blob, as the index knows it. */
  public static final class Entry extends StoredItem {
    /** An entry; {@code lastPulledMillis} is also taken as already persisted. */
    public Entry(long size, long createdMillis, long lastPulledMillis) {
      super(size, createdMillis, lastPulledMillis);
    }
  }

  /**
   * A stored blob as reported to operators.
   *
   * @param digest the blob's digest
   * @param size bytes
   * @param created when it was stored
   * @param lastPulled when a client last pulled it or a manifest referencing it
   */
  public record BlobInfo(Digest digest, long size, Instant created, Instant lastPulled) {}

  private final Map<Digest, Entry> entries = new ConcurrentHashMap<>();
  private final AtomicLong bytes = new AtomicLong();

  /** The entry of a stored blob. */
  public Optional<Entry> entry(Digest digest) {
    return Optional.ofNullable(entries.get(digest));
  }

  /** Size in bytes of a stored blob. */
  public Optional<Long> size(Digest digest) {
    Entry e = entries.get(digest);
    return e == null ? Optional.empty() : Optional.of(e.size());
  }

  /** Whether the blob is stored. */
  public boolean contains(Digest digest) {
    return entries.containsKey(digest);
  }

  /** The entry of a stored blob with a pull recorded at {@code nowMillis}, or null. Lock-free. */
  public Entry pulled(Digest digest, long nowMillis) {
    Entry e = entries.get(digest);
    if (e != null) {
      e.touch(nowMillis);
    }
    return e;
  }

  /**
   * Indexes a blob found in the store (start-up, a refresh); when it is indexed already, its last
   * pull moves to {@code lastPulledMillis} if that is later (a pull another replica recorded in a
   * shared store), taken as persisted.
   *
   * @return whether the blob was added
   */
  public boolean found(Digest digest, long size, long createdMillis, long lastPulledMillis) {
    boolean[] added = {false};
    Entry e =
        entries.computeIfAbsent(
            digest,
            d -> {
              bytes.addAndGet(size);
              added[0] = true;
              return new Entry(size, createdMillis, lastPulledMillis);
            });
    if (!added[0] && lastPulledMillis > e.lastPulledMillis) {
      e.lastPulledMillis = lastPulledMillis; // a racing hit stores nearly the same value
      if (lastPulledMillis > e.persistedMillis) {
        e.persistedMillis = lastPulledMillis;
      }
    }
    return added[0];
  }

  /** A blob was stored now: the entry is (re)made, created and pulled now. */
  public void stored(Digest digest, long size, long nowMillis) {
    entries.compute(
        digest,
        (d, existing) -> {
          if (existing == null) {
            bytes.addAndGet(size);
          }
          return new Entry(size, nowMillis, nowMillis);
        });
  }

  /** Runs {@code underLock} under the index's lock for the digest, whether it is indexed or not. */
  public void locked(Digest digest, Runnable underLock) {
    entries.compute(
        digest,
        (d, e) -> {
          underLock.run();
          return e;
        });
  }

  /**
   * Takes a blob out of the index unless it was pulled after {@code ifNotPulledSince}.
   *
   * @return bytes freed, or -1 when it was not indexed or was kept
   */
  public long evict(Digest digest, long ifNotPulledSince) {
    long[] freed = {-1};
    entries.computeIfPresent(
        digest,
        (d, e) -> {
          if (e.lastPulledMillis() > ifNotPulledSince) {
            return e;
          }
          freed[0] = e.size();
          bytes.addAndGet(-e.size());
          return null;
        });
    return freed[0];
  }

  /** Takes a blob out of the index when {@code which} accepts its entry; whether it did. */
  public boolean removeIf(Digest digest, Predicate<Entry> which) {
    boolean[] removed = {false};
    entries.computeIfPresent(
        digest,
        (d, e) -> {
          if (!which.test(e)) {
            return e;
          }
          bytes.addAndGet(-e.size());
          removed[0] = true;
          return null;
        });
    return removed[0];
  }

  /** Runs {@code underLock} when the blob is not indexed, under the index's lock for it. */
  public void ifAbsent(Digest digest, Runnable underLock) {
    entries.compute(
        digest,
        (d, e) -> {
          if (e == null) {
            underLock.run();
          }
          return e;
        });
  }

  /** Visits every entry (a snapshot per entry; changes meanwhile may or may not be seen). */
  public void forEach(BiConsumer<Digest, Entry> visitor) {
    entries.forEach(visitor);
  }

  /** Every stored blob, unordered. */
  public List<BlobInfo> list() {
    List<BlobInfo> out = new ArrayList<>(entries.size());
    entries.forEach(
        (d, e) ->
            out.add(
                new BlobInfo(
                    d,
                    e.size(),
                    Instant.ofEpochMilli(e.createdMillis()),
                    Instant.ofEpochMilli(e.lastPulledMillis()))));
    return out;
  }

  /** Number of stored blobs. */
  public int count() {
    return entries.size();
  }

  /** Total bytes of stored blobs. */
  public long bytes() {
    return bytes.get();
  }
}
