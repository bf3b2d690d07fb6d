package io.registrycache.admin;

import io.registrycache.oci.Digest;
import io.registrycache.storage.CacheCollector;
import io.registrycache.storage.CacheCollector.Reason;
import io.registrycache.storage.CacheCollector.Removal;
import io.registrycache.storage.ManifestStore;
import io.registrycache.storage.TagRef;
import io.registrycache.upstream.Upstreams;
import java.time.Clock;
import java.time.Instant;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Set;
import org.springframework.stereotype.Component;

/**
 * Prunes by age, pattern and count ({@link PruneRequest}) and evicts single images. Selection
 * happens here; removal, with its safety rules, in {@link CacheCollector}. Blocking.
 */
@Component
public class Pruner {

  private final ManifestStore manifests;
  private final CacheInventory inventory;
  private final CacheCollector collector;
  private final Clock clock;
  private final Upstreams upstreams;

  /**
   * @param upstreams whose default names the upstream of an eviction by tag that names none
   */
  public Pruner(
      ManifestStore manifests,
      CacheInventory inventory,
      CacheCollector collector,
      Clock clock,
      Upstreams upstreams) {
    this.manifests = manifests;
    this.inventory = inventory;
    this.collector = collector;
    this.clock = clock;
    this.upstreams = upstreams;
  }

  /** Removes (or, in a dry run, lists) what {@code request} selects. */
  public Removal prune(PruneRequest request) {
    collector.rescanShared(); // a shared store: every replica's content and last pulls
    Instant now = clock.instant();
    Instant cutoff = request.olderThan() == null ? null : now.minus(request.olderThan());
    List<TagRef> tags = manifests.allTags();
    List<TagRef> selected = selectTags(tags, request, cutoff);
    List<Digest> untagged = new ArrayList<>();
    Instant orphansBefore = null;
    if (cutoff != null && request.pattern() == null && request.keep() == null) {
      Set<Digest> tagged = new HashSet<>();
      tags.forEach(t -> tagged.add(t.digest()));
      for (Digest m : inventory.untaggedTopLevel(tagged)) {
        if (lastPulled(m) < cutoff.toEpochMilli()) {
          untagged.add(m);
        }
      }
      orphansBefore = cutoff;
    }
    return collector.remove(selected, untagged, orphansBefore, Reason.PRUNE, request.dryRun());
  }

  /** The tag links a prune request selects, in the order found. */
  List<TagRef> selectTags(List<TagRef> tags, PruneRequest request, Instant cutoff) {
    Set<TagRef> beyondKeep = new HashSet<>();
    if (request.keep() != null) {
      Map<String, List<TagRef>> byRepository = new LinkedHashMap<>();
      for (TagRef t : tags) {
        byRepository
            .computeIfAbsent(t.upstream() + "/" + t.repository(), k -> new ArrayList<>())
            .add(t);
      }
      for (List<TagRef> repo : byRepository.values()) {
        repo.sort(
            Comparator.comparingLong((TagRef t) -> lastPulled(t.digest()))
                .reversed()
                .thenComparing(TagRef::tag));
        beyondKeep.addAll(repo.subList(Math.min(request.keep(), repo.size()), repo.size()));
      }
    }
    List<TagRef> out = new ArrayList<>();
    for (TagRef t : tags) {
      boolean match =
          (request.pattern() == null || request.pattern().matcher(t.image()).matches())
              && (cutoff == null || lastPulled(t.digest()) < cutoff.toEpochMilli())
              && (request.keep() == null || beyondKeep.contains(t));
      if (match) {
        out.add(t);
      }
    }
    return out;
  }

  /** Last pull of a manifest, epoch ms; 0 for a tag whose manifest is gone (a dangling link). */
  private long lastPulled(Digest manifest) {
    return manifests.entry(manifest).map(ManifestStore.Entry::lastPulledMillis).orElse(0L);
  }

  /**
   * Evicts one image: by tag, that tag link (and the manifest with the content only it used, if no
   * other tag link points at it); by digest, the manifest and every tag link pointing at it.
   *
   * @param upstream upstream key; {@code null} or blank for the default upstream (the built-in one
   *     or the operator's {@code default-upstream}, the effective default, not the raw setting)
   * @param repository repository name; required with {@code tag}
   * @param tag the tag, or {@code null} when {@code digest} is given
   * @param digest the manifest digest, or {@code null} when {@code tag} is given
   * @param dryRun report only
   * @return what went; empty lists when nothing matched
   * @throws UnknownUpstreamException by tag, when {@code upstream} is neither configured nor the
   *     upstream of any cached tag
   */
  public Removal evict(
      String upstream, String repository, String tag, Digest digest, boolean dryRun) {
    collector.rescanShared();
    if (digest != null) {
      return collector.remove(List.of(), List.of(digest), null, Reason.EVICT, dryRun);
    }
    String key =
        upstream == null || upstream.isBlank() ? upstreams.defaultUpstream().key() : upstream;
    List<TagRef> tags = manifests.allTags();
    if (upstreams.byKey(key).isEmpty() && tags.stream().noneMatch(t -> t.upstream().equals(key))) {
      throw new UnknownUpstreamException(
          key, upstreams.all().stream().map(u -> u.key()).sorted().toList());
    }
    Optional<TagRef> ref =
        tags.stream()
            .filter(
                t ->
                    t.upstream().equals(key)
                        && t.repository().equals(repository)
                        && t.tag().equals(tag))
            .findFirst();
    return collector.remove(
        ref.map(List::of).orElse(List.of()), List.of(), null, Reason.EVICT, dryRun);
  }

  /**
   * An eviction names an upstream key that is not configured and of which nothing is cached (a
   * typo, most likely): answered 404, not 200 with nothing evicted.
   */
  public static final class UnknownUpstreamException extends RuntimeException {
    UnknownUpstreamException(String key, List<String> configured) {
      super(
          "unknown upstream '"
              + key
              + "': neither configured nor the upstream of any cached tag; upstream keys: "
              + String.join(", ", configured));
    }
  }
}
