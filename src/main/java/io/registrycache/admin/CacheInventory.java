package io.registrycache.admin;

import com.google.re2j.Pattern;
import io.registrycache.oci.Digest;
import io.registrycache.oci.ManifestContent;
import io.registrycache.storage.BlobIndex;
import io.registrycache.storage.BlobStore;
import io.registrycache.storage.CacheCollector;
import io.registrycache.storage.ManifestStore;
import io.registrycache.storage.TagRef;
import java.time.Instant;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.Deque;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Set;
import org.springframework.stereotype.Component;

/**
 * What the cache holds, as operators see it: images (tag links, and manifests pulled by digest
 * only) and blobs. Read-only; reading records no pull. Blocking (walks the tag links, reads
 * manifests whose references are not known yet).
 */
@Component
public class CacheInventory {

  /**
   * One cached image.
   *
   * @param upstream the upstream's configuration key (e.g. {@code local})
   * @param repository the repository name at that upstream; {@code null} for a manifest pulled by
   *     digest only (content is shared across repositories)
   * @param tag the tag; {@code null} for a manifest pulled by digest only
   * @param digest the manifest digest, {@code sha256:...}
   * @param mediaType the manifest's media type
   * @param size bytes held for it: the manifest, its child manifests and every stored blob they
   *     reference, each counted once
   * @param complete whether every referenced blob and child manifest is stored
   * @param platforms {@code os/arch[/variant]} of an index's children; empty for an image manifest
   * @param lastPulled when the manifest was last pulled
   * @param created when the manifest was stored
   */
  public record Image(
      String upstream,
      String repository,
      String tag,
      Digest digest,
      String mediaType,
      long size,
      boolean complete,
      List<String> platforms,
      Instant lastPulled,
      Instant created) {

    /** {@code <upstream>/<repository>:<tag>}, or {@code @<digest>} for an untagged manifest. */
    public String image() {
      return tag == null ? "@" + digest : upstream + "/" + repository + ":" + tag;
    }
  }

  /**
   * What is stored, in items and bytes, and the budget it is held to.
   *
   * @param storedBytes bytes of blobs and manifests
   * @param blobs stored blobs
   * @param blobBytes their bytes
   * @param manifests stored manifests
   * @param manifestBytes their bytes
   * @param budget {@code storage.max-bytes} and its watermarks, bytes
   */
  public record Totals(
      long storedBytes,
      long blobs,
      long blobBytes,
      long manifests,
      long manifestBytes,
      CacheCollector.Budget budget) {}

  private final ManifestStore manifests;
  private final BlobStore blobs;
  private final CacheCollector collector;

  public CacheInventory(ManifestStore manifests, BlobStore blobs, CacheCollector collector) {
    this.manifests = manifests;
    this.blobs = blobs;
    this.collector = collector;
  }

  /** Stored items and bytes, and the budget, as this replica's index has them. */
  public Totals totals() {
    return new Totals(
        collector.storedBytes(),
        blobs.count(),
        blobs.bytes(),
        manifests.count(),
        manifests.bytes(),
        collector.budget());
  }

  /**
   * On a store shared by replicas, brings this replica's index up to date with the bucket first
   * ({@link CacheCollector#rescanShared}), so that the listings after it are the cluster's.
   * Blocking; a no-op on a store of this process alone.
   */
  public void freshen() {
    collector.rescanShared();
  }

  /**
   * Every cached image, most recently pulled first.
   *
   * @param filter regular expression (RE2 syntax) searched in {@link Image#image()}; {@code null}
   *     for all
   */
  public List<Image> images(Pattern filter) {
    List<TagRef> tags = manifests.allTags();
    Set<Digest> tagged = new HashSet<>();
    List<Image> out = new ArrayList<>();
    for (TagRef t : tags) {
      tagged.add(t.digest());
      image(t.upstream(), t.repository(), t.tag(), t.digest()).ifPresent(out::add);
    }
    for (Digest m : untaggedTopLevel(tagged)) {
      image(null, null, null, m).ifPresent(out::add);
    }
    out.removeIf(i -> filter != null && !filter.matcher(i.image()).find());
    out.sort(Comparator.comparing(Image::lastPulled).reversed().thenComparing(Image::image));
    return out;
  }

  /** Manifests no tag link points at and no other manifest references. */
  List<Digest> untaggedTopLevel(Set<Digest> tagged) {
    Set<Digest> referenced = new HashSet<>();
    List<Digest> all = manifests.digests();
    for (Digest m : all) {
      manifests.content(m).ifPresent(c -> referenced.addAll(c.referencedDigests()));
    }
    List<Digest> out = new ArrayList<>();
    for (Digest m : all) {
      if (!tagged.contains(m) && !referenced.contains(m)) {
        out.add(m);
      }
    }
    return out;
  }

  private Optional<Image> image(String upstream, String repository, String tag, Digest digest) {
    Optional<ManifestStore.Entry> entry = manifests.entry(digest);
    Optional<ManifestContent> content = manifests.content(digest);
    if (entry.isEmpty() || content.isEmpty()) {
      return Optional.empty(); // dangling link: the next pull fetches it
    }
    long size = 0;
    boolean complete = true;
    Set<Digest> seen = new HashSet<>();
    Deque<Digest> queue = new ArrayDeque<>(List.of(digest));
    while (!queue.isEmpty()) {
      Digest d = queue.poll();
      if (!seen.add(d)) {
        continue;
      }
      Optional<ManifestStore.Entry> m = manifests.entry(d);
      if (m.isPresent()) {
        size += m.get().size();
        manifests.content(d).ifPresent(c -> queue.addAll(c.referencedDigests()));
        continue;
      }
      Optional<Long> b = blobs.size(d);
      if (b.isPresent()) {
        size += b.get();
      } else {
        complete = false;
      }
    }
    ManifestStore.Entry e = entry.get();
    return Optional.of(
        new Image(
            upstream,
            repository,
            tag,
            digest,
            content.get().mediaType().value(),
            size,
            complete,
            content.get().platforms(),
            Instant.ofEpochMilli(e.lastPulledMillis()),
            Instant.ofEpochMilli(e.createdMillis())));
  }

  /**
   * Every stored blob, most recently pulled first.
   *
   * @param filter regular expression (RE2 syntax) searched in the digest; {@code null} for all
   * @return the blobs, each with how many stored manifests reference it
   */
  public List<BlobView> blobs(Pattern filter) {
    Map<Digest, Integer> refCount = new HashMap<>();
    for (Digest m : manifests.digests()) {
      manifests
          .content(m)
          .ifPresent(c -> c.referencedDigests().forEach(r -> refCount.merge(r, 1, Integer::sum)));
    }
    List<BlobView> out = new ArrayList<>();
    for (BlobIndex.BlobInfo b : blobs.list()) {
      if (filter == null || filter.matcher(b.digest().toString()).find()) {
        out.add(
            new BlobView(
                b.digest(),
                b.size(),
                refCount.getOrDefault(b.digest(), 0),
                b.lastPulled(),
                b.created()));
      }
    }
    out.sort(Comparator.comparing(BlobView::lastPulled).reversed());
    return out;
  }

  /**
   * A stored blob.
   *
   * @param digest its digest
   * @param size bytes
   * @param manifests how many stored manifests reference it
   * @param lastPulled when it (or a manifest referencing it) was last pulled
   * @param created when it was stored
   */
  public record BlobView(
      Digest digest, long size, int manifests, Instant lastPulled, Instant created) {}
}
