package io.registrycache.storage;

import io.registrycache.config.RegistryCacheProperties;
import io.registrycache.config.StorageProperties;
import io.registrycache.oci.Digest;
import java.io.IOException;
import java.time.Instant;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Collection;
import java.util.Comparator;
import java.util.Deque;
import java.util.HashMap;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.locks.ReentrantLock;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import org.springframework.stereotype.Component;

/**
 * The one place that removes content from the cache: eviction under the disk budget (least recently
 * pulled first), and removal of chosen tags and manifests with the content only they use (pruning,
 * evicting one image). Every removal runs under one lock, off the request path; the request path
 * never takes it.
 *
 * <p>Rules, whatever the reason:
 *
 * <ul>
 *   <li>A blob is removed only when no remaining manifest references it (pruning), or when it is
 *       the least recently pulled item under budget pressure — then every manifest referencing it
 *       goes too (and every index referencing those, and the tag links pointing at any of them), so
 *       no manifest whose blobs are gone is served as complete.
 *   <li>An item pulled after it was selected is kept: it became hot meanwhile.
 *   <li>A blob download in flight is never touched (it is not in the index until verified).
 * </ul>
 *
 * A pull racing a removal either gets a complete image or misses and fetches again: tag link gone →
 * the tag is fetched; manifest gone → fetched; blob gone from the index → fetched, while a request
 * that looked it up just before still opens the file within the delete grace.
 */
@Component
public class CacheCollector {

  private static final Logger log = LoggerFactory.getLogger(CacheCollector.class);

  /** Why content was removed; the {@code reason} tag of the eviction metrics. */
  public enum Reason {
    BUDGET,
    PRUNE,
    EVICT
  }

  /**
   * One removed (or, in a dry run, removable) item.
   *
   * @param digest its digest
   * @param size bytes
   * @param lastPulled when it was last pulled
   */
  public record Item(Digest digest, long size, Instant lastPulled) {}

  /**
   * What a removal took away, or would take away in a dry run.
   *
   * @param tags tag links removed
   * @param manifests manifests removed
   * @param blobs blobs removed
   * @param bytes bytes freed (manifests and blobs)
   * @param dryRun whether nothing was actually removed
   */
  public record Removal(
      List<TagRef> tags, List<Item> manifests, List<Item> blobs, long bytes, boolean dryRun) {}

  private final BlobStore blobs;
  private final ManifestStore manifests;
  private final StorageMetrics metrics;
  private final long maxBytes;
  private final double high;
  private final double low;
  private final int batchSize;
  private final ReentrantLock lock = new ReentrantLock();

  public CacheCollector(
      BlobStore blobs,
      ManifestStore manifests,
      StorageMetrics metrics,
      RegistryCacheProperties properties) {
    StorageProperties s = properties.storage();
    this.blobs = blobs;
    this.manifests = manifests;
    this.metrics = metrics;
    this.maxBytes = s.maxBytes();
    this.high = s.highWatermark();
    this.low = s.lowWatermark();
    this.batchSize = Math.max(1, s.evictionBatchSize());
  }

  /**
   * On a store shared by replicas ({@link BlobStore#shared}), brings the blob and manifest indexes
   * up to date with it: what every replica stored or removed, the last pulls every replica
   * recorded. One listing of the store; a no-op on a store of this process alone. Blocking.
   */
  public void rescanShared() {
    if (blobs.shared()) {
      blobs.rescan();
      manifests.rescan();
    }
  }

  /** Bytes of stored blobs and manifests. */
  public long storedBytes() {
    return blobs.bytes() + manifests.bytes();
  }

  /** The disk budget in bytes; 0 = unlimited. */
  public long maxBytes() {
    return maxBytes;
  }

  /**
   * The disk budget and its watermarks ({@code storage.max-bytes}, {@code high-watermark}, {@code
   * low-watermark}), in bytes: eviction starts above the high one and stops at the low one; all 0
   * when unlimited.
   */
  public record Budget(long maxBytes, long highWatermarkBytes, long lowWatermarkBytes) {}

  /** The budget as set, in bytes. */
  public Budget budget() {
    return new Budget(maxBytes, (long) (maxBytes * high), (long) (maxBytes * low));
  }

  /** Whether the stored bytes exceed the high watermark. */
  public boolean overHighWatermark() {
    return maxBytes > 0 && storedBytes() > (long) (maxBytes * high);
  }

  /**
   * Evicts the least recently pulled content while the stored bytes exceed the high watermark, down
   * to the low watermark, {@code eviction-batch-size} items at a time. Blocking.
   *
   * @return what was evicted (empty when under the high watermark or unlimited)
   */
  public Removal enforceBudget() {
    if (!overHighWatermark()) {
      return new Removal(List.of(), List.of(), List.of(), 0, false);
    }
    lock.lock();
    try {
      long target = (long) (maxBytes * low);
      long before = storedBytes();
      Acc acc = new Acc();
      Graph graph = null;
      while (storedBytes() > target) {
        List<Candidate> batch = lruBatch(batchSize);
        if (batch.isEmpty()) {
          break;
        }
        if (graph == null) {
          graph = Graph.build(manifests);
        }
        for (Candidate c : batch) {
          if (storedBytes() <= target) {
            break;
          }
          evictCascading(c, graph, acc, Reason.BUDGET);
        }
      }
      log.info(
          "disk budget: evicted {} blobs and {} manifests ({} bytes), stored {} -> {} bytes (budget {}, low watermark {})",
          acc.blobs.size(),
          acc.manifests.size(),
          acc.bytes,
          before,
          storedBytes(),
          maxBytes,
          target);
      return acc.toRemoval(false);
    } finally {
      lock.unlock();
    }
  }

  private record Candidate(Digest digest, boolean manifest, long lastPulled) {}

  /** The {@code n} least recently pulled blobs and manifests. */
  private List<Candidate> lruBatch(int n) {
    List<Candidate> all = new ArrayList<>();
    for (BlobIndex.BlobInfo b : blobs.list()) {
      all.add(new Candidate(b.digest(), false, b.lastPulled().toEpochMilli()));
    }
    for (Digest d : manifests.digests()) {
      manifests.entry(d).ifPresent(e -> all.add(new Candidate(d, true, e.lastPulledMillis())));
    }
    all.sort(Comparator.comparingLong(Candidate::lastPulled));
    return all.subList(0, Math.min(n, all.size()));
  }

  /** Evicts one item and, upwards, every manifest referencing it and their tag links. */
  private void evictCascading(Candidate c, Graph graph, Acc acc, Reason reason) {
    Deque<Digest> manifestQueue = new ArrayDeque<>();
    if (c.manifest()) {
      manifestQueue.add(c.digest());
    } else {
      long freed = blobs.evict(c.digest(), c.lastPulled());
      if (freed < 0) {
        return; // pulled since it was selected, or gone
      }
      acc.blob(new Item(c.digest(), freed, Instant.ofEpochMilli(c.lastPulled())), reason);
      manifestQueue.addAll(graph.referrers(c.digest()));
    }
    Set<Digest> seen = new HashSet<>();
    while (!manifestQueue.isEmpty()) {
      Digest m = manifestQueue.poll();
      if (!seen.add(m)) {
        continue;
      }
      if (removeManifest(
          m,
          graph,
          acc,
          reason,
          c.manifest() && m.equals(c.digest()) ? c.lastPulled() : Long.MAX_VALUE)) {
        manifestQueue.addAll(graph.referrers(m));
      }
    }
  }

  private boolean removeManifest(
      Digest m, Graph graph, Acc acc, Reason reason, long ifNotPulledSince) {
    ManifestStore.Entry e = manifests.entry(m).orElse(null);
    if (e == null || e.lastPulledMillis() > ifNotPulledSince) {
      return false;
    }
    for (TagRef t : graph.tagsOf(m)) {
      if (manifests.deleteTag(t)) {
        acc.tags.add(t);
      }
    }
    try {
      manifests.delete(m);
    } catch (IOException ex) {
      log.warn("cannot delete manifest {}: {}", m, ex.toString());
      return false;
    }
    acc.manifest(new Item(m, e.size(), Instant.ofEpochMilli(e.lastPulledMillis())), reason);
    return true;
  }

  /**
   * Removes tag links and manifests and then whatever content only they used: manifests no longer
   * reachable from a remaining tag link or from an untagged top-level manifest, and blobs
   * referenced by removed manifests and by no remaining one. Blocking.
   *
   * @param tags tag links to remove
   * @param roots manifests to remove even if a tag link points at them (those links go too)
   * @param orphanBlobsPulledBefore also remove blobs referenced by no manifest at all and last
   *     pulled before this instant; {@code null} for none
   * @param reason for logs and metrics
   * @param dryRun report only, remove nothing
   */
  public Removal remove(
      Collection<TagRef> tags,
      Collection<Digest> roots,
      Instant orphanBlobsPulledBefore,
      Reason reason,
      boolean dryRun) {
    lock.lock();
    try {
      Graph graph = Graph.build(manifests);
      Set<String> goneTags = new HashSet<>();
      List<TagRef> tagsToRemove = new ArrayList<>();
      for (TagRef t : tags) {
        if (goneTags.add(t.image())) {
          tagsToRemove.add(t);
        }
      }
      for (Digest root : roots) {
        for (TagRef t : graph.tagsOf(root)) {
          if (goneTags.add(t.image())) {
            tagsToRemove.add(t);
          }
        }
      }
      // Roots of what stays: remaining tag links, and untagged top-level manifests.
      Set<Digest> removedRoots = new HashSet<>(roots);
      Deque<Digest> live = new ArrayDeque<>();
      for (TagRef t : graph.tags) {
        if (!goneTags.contains(t.image()) && !removedRoots.contains(t.digest())) {
          live.add(t.digest());
        }
      }
      Set<Digest> linkedByRemoved = new HashSet<>();
      for (TagRef t : tagsToRemove) {
        linkedByRemoved.add(t.digest());
      }
      for (Digest m : graph.manifests) {
        if (graph.tagsOf(m).isEmpty()
            && graph.referrers(m).isEmpty()
            && !linkedByRemoved.contains(m)
            && !removedRoots.contains(m)) {
          live.add(m);
        }
      }
      Set<Digest> reachable = new HashSet<>();
      while (!live.isEmpty()) {
        Digest d = live.poll();
        if (reachable.add(d)) {
          live.addAll(graph.refs(d));
        }
      }
      Acc acc = new Acc();
      acc.tags.addAll(tagsToRemove);
      List<Digest> deadManifests = new ArrayList<>();
      Set<Digest> deadBlobs = new HashSet<>();
      for (Digest m : graph.manifests) {
        if (!reachable.contains(m)) {
          deadManifests.add(m);
          for (Digest ref : graph.refs(m)) {
            if (!reachable.contains(ref) && !graph.manifests.contains(ref)) {
              deadBlobs.add(ref);
            }
          }
        }
      }
      if (orphanBlobsPulledBefore != null) {
        for (BlobIndex.BlobInfo b : blobs.list()) {
          if (!reachable.contains(b.digest())
              && graph.referrers(b.digest()).isEmpty()
              && b.lastPulled().isBefore(orphanBlobsPulledBefore)) {
            deadBlobs.add(b.digest());
          }
        }
      }
      if (dryRun) {
        for (Digest m : deadManifests) {
          manifests
              .entry(m)
              .ifPresent(
                  e ->
                      acc.manifestDry(
                          new Item(m, e.size(), Instant.ofEpochMilli(e.lastPulledMillis()))));
        }
        for (Digest b : deadBlobs) {
          blobs
              .entry(b)
              .ifPresent(
                  e ->
                      acc.blobDry(
                          new Item(b, e.size(), Instant.ofEpochMilli(e.lastPulledMillis()))));
        }
        return acc.toRemoval(true);
      }
      // Snapshot last-pulled times now; anything pulled after this is kept.
      Map<Digest, Long> snapshot = new HashMap<>();
      for (Digest m : deadManifests) {
        manifests.entry(m).ifPresent(e -> snapshot.put(m, e.lastPulledMillis()));
      }
      for (Digest b : deadBlobs) {
        blobs.entry(b).ifPresent(e -> snapshot.put(b, e.lastPulledMillis()));
      }
      acc.tags.clear();
      for (TagRef t : tagsToRemove) {
        if (manifests.deleteTag(t)) {
          acc.tags.add(t);
        }
      }
      for (Digest m : deadManifests) {
        Long since = snapshot.get(m);
        if (since != null) {
          removeManifest(m, graph, acc, reason, since);
        }
      }
      for (Digest b : deadBlobs) {
        Long since = snapshot.get(b);
        if (since != null) {
          long freed = blobs.evict(b, since);
          if (freed >= 0) {
            acc.blob(new Item(b, freed, Instant.ofEpochMilli(since)), reason);
          }
        }
      }
      log.info(
          "{}: removed {} tag links, {} manifests, {} blobs ({} bytes)",
          reason.name().toLowerCase(Locale.ROOT),
          acc.tags.size(),
          acc.manifests.size(),
          acc.blobs.size(),
          acc.bytes);
      return acc.toRemoval(false);
    } finally {
      lock.unlock();
    }
  }

  /** Accumulates a removal and counts it. */
  private final class Acc {
    final List<TagRef> tags = new ArrayList<>();
    final List<Item> manifests = new ArrayList<>();
    final List<Item> blobs = new ArrayList<>();
    long bytes;

    void blob(Item i, Reason reason) {
      blobs.add(i);
      bytes += i.size();
      metrics.evicted("blob", reason.name().toLowerCase(Locale.ROOT), i.size());
      log.debug(
          "{}: removed blob {} ({} bytes, last pulled {})",
          reason,
          i.digest(),
          i.size(),
          i.lastPulled());
    }

    void manifest(Item i, Reason reason) {
      manifests.add(i);
      bytes += i.size();
      metrics.evicted("manifest", reason.name().toLowerCase(Locale.ROOT), i.size());
      log.debug(
          "{}: removed manifest {} ({} bytes, last pulled {})",
          reason,
          i.digest(),
          i.size(),
          i.lastPulled());
    }

    void blobDry(Item i) {
      blobs.add(i);
      bytes += i.size();
    }

    void manifestDry(Item i) {
      manifests.add(i);
      bytes += i.size();
    }

    Removal toRemoval(boolean dryRun) {
      return new Removal(
          List.copyOf(tags), List.copyOf(manifests), List.copyOf(blobs), bytes, dryRun);
    }
  }

  /** Who references what, and which tag links point where: a snapshot. */
  static final class Graph {
    final Set<Digest> manifests = new HashSet<>();
    final List<TagRef> tags;
    private final Map<Digest, List<Digest>> refs = new HashMap<>();
    private final Map<Digest, List<Digest>> referrers = new HashMap<>();
    private final Map<Digest, List<TagRef>> tagsByDigest = new LinkedHashMap<>();

    private Graph(List<TagRef> tags) {
      this.tags = tags;
    }

    static Graph build(ManifestStore store) {
      Graph g = new Graph(store.allTags());
      for (Digest m : store.digests()) {
        store
            .content(m)
            .ifPresent(
                c -> {
                  g.manifests.add(m);
                  g.refs.put(m, c.referencedDigests());
                  for (Digest r : c.referencedDigests()) {
                    g.referrers.computeIfAbsent(r, k -> new ArrayList<>()).add(m);
                  }
                });
      }
      for (TagRef t : g.tags) {
        g.tagsByDigest.computeIfAbsent(t.digest(), k -> new ArrayList<>()).add(t);
      }
      return g;
    }

    List<Digest> refs(Digest m) {
      return refs.getOrDefault(m, List.of());
    }

    List<Digest> referrers(Digest d) {
      return referrers.getOrDefault(d, List.of());
    }

    List<TagRef> tagsOf(Digest m) {
      return tagsByDigest.getOrDefault(m, List.of());
    }
  }
}
