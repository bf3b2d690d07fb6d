package io.registrycache.storage;

import io.registrycache.config.ContentScope;
import io.registrycache.oci.Digest;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.util.HashSet;
import java.util.Map;
import java.util.Optional;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.function.Predicate;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Where the stored content of one kind (blobs or manifests) may be served by digest: a link per
 * (digest, upstream, repository) it was fetched for or that the upstream confirmed, like the
 * distribution registry's per-repository links. The bytes are stored once; the links say where.
 *
 * <p>Durably through a {@link LinkPersistence}: on disk ({@link #files}), one append-only journal
 * {@code links/<kind>.journal} with a line per link made and per digest removed, compacted at
 * start-up ({@link LinkJournal}); in the object store ({@code storage.type=s3}) empty objects
 * {@code links/<kind>/<algorithm>/<hex>/<upstream>/<repository>/_link}, so a replica that starts
 * empty (or offline) serves what another linked. In memory, digest → {@code
 * <upstream>/<repository>} keys, loaded at start-up (links of digests that are no longer stored are
 * dropped then), or, when the persistence says so ({@link LinkPersistence#onDemand}), one digest's
 * at a time on first use ({@link #recheck}). Link and unlink block.
 */
public final class ContentLinks {

  /**
   * Links of {@code kind} on the file system under {@code storage.path}: the journal {@code
   * links/<kind>.journal} ({@link LinkJournal}).
   */
  public static LinkPersistence files(StorageLayout layout, String kind) {
    return new LinkJournal(layout, kind);
  }

  private static final Logger log = LoggerFactory.getLogger(ContentLinks.class);

  private final LinkPersistence persistence;
  private final ContentScope scope;
  private final Map<Digest, Set<String>> links = new ConcurrentHashMap<>();

  /**
   * Loads the links of {@code kind} from disk, dropping those whose digest {@code stored} rejects.
   *
   * @param kind {@code blobs} or {@code manifests}
   */
  public ContentLinks(
      StorageLayout layout, String kind, ContentScope scope, Predicate<Digest> stored) {
    this(files(layout, kind), kind, scope, stored);
  }

  /**
   * Loads the links of {@code kind} from {@code persistence}, dropping those whose digest {@code
   * stored} rejects.
   */
  public ContentLinks(
      LinkPersistence persistence, String kind, ContentScope scope, Predicate<Digest> stored) {
    this.persistence = persistence;
    this.scope = scope;
    if (persistence.onDemand()) {
      log.info("{} links: looked up in the store on first use", kind);
      return;
    }
    Set<Digest> orphans = new HashSet<>();
    persistence.scan(
        (digest, key) -> {
          if (stored.test(digest)) {
            links.computeIfAbsent(digest, d -> ConcurrentHashMap.newKeySet()).add(key);
          } else {
            orphans.add(digest);
          }
        });
    // deleted after the walk, which must not see its folders vanish
    orphans.forEach(persistence::removeAll);
    log.info(
        "{} links: {} digests linked; links of {} digests no longer stored dropped",
        kind,
        links.size(),
        orphans.size());
  }

  /** The scope this cache serves content in. */
  public ContentScope scope() {
    return scope;
  }

  /**
   * Whether stored content {@code digest} may be served in {@code repository} of {@code
   * upstreamKey} under the configured scope. Memory only.
   */
  public boolean servable(Digest digest, String upstreamKey, String repository) {
    return servable(digest, upstreamKey, repository, false);
  }

  /**
   * As {@link #servable(Digest, String, String)}; with {@code repositoryOnly}, as if the scope were
   * {@link ContentScope#REPOSITORY} whatever is configured (for an upstream whose clients may see
   * different repositories). Memory only.
   */
  public boolean servable(
      Digest digest, String upstreamKey, String repository, boolean repositoryOnly) {
    ContentScope scope = repositoryOnly ? ContentScope.REPOSITORY : this.scope;
    if (scope == ContentScope.SHARED) {
      return true;
    }
    Set<String> keys = links.get(digest);
    if (keys == null) {
      return false;
    }
    if (scope == ContentScope.REPOSITORY) {
      return keys.contains(key(upstreamKey, repository));
    }
    String prefix = StorageLayout.safeSegment(upstreamKey) + "/";
    for (String k : keys) {
      if (k.startsWith(prefix)) {
        return true;
      }
    }
    return false;
  }

  /**
   * Whether another replica on a shared store linked {@code digest} where {@link #servable} says it
   * is not (one request to an object store; nothing on the file system); a link found is kept in
   * memory. Lets a replica serve what another fetched for that repository without asking the
   * upstream again. Blocking.
   */
  public boolean recheck(Digest digest, String upstreamKey, String repository) {
    return recheck(digest, upstreamKey, repository, false);
  }

  /**
   * As {@link #recheck(Digest, String, String)}, with {@code repositoryOnly} as {@link
   * #servable(Digest, String, String, boolean)}.
   */
  public boolean recheck(
      Digest digest, String upstreamKey, String repository, boolean repositoryOnly) {
    if (servable(digest, upstreamKey, repository, repositoryOnly)) {
      return true;
    }
    boolean inRepository = repositoryOnly || scope == ContentScope.REPOSITORY;
    Optional<String> found =
        persistence.find(
            digest, StorageLayout.safeSegment(upstreamKey), inRepository ? repository : null);
    found.ifPresent(
        key -> links.computeIfAbsent(digest, d -> ConcurrentHashMap.newKeySet()).add(key));
    return found.isPresent();
  }

  /**
   * Records that {@code digest} may be served in {@code repository} of {@code upstreamKey}.
   * Blocking; idempotent.
   */
  public void link(Digest digest, String upstreamKey, String repository) {
    String key = key(upstreamKey, repository);
    Set<String> keys = links.computeIfAbsent(digest, d -> ConcurrentHashMap.newKeySet());
    if (keys.contains(key)) {
      return;
    }
    try {
      persistence.create(digest, StorageLayout.safeSegment(upstreamKey), repository);
    } catch (IOException e) {
      throw new UncheckedIOException("cannot link " + digest + " to " + key, e);
    }
    keys.add(key);
  }

  /** Closes the persistence (the file-system journal's open file); the links stay usable. */
  public void close() {
    persistence.close();
  }

  /** Removes every link of {@code digest} (its content left the store). Blocking. */
  public void unlinkAll(Digest digest) {
    links.remove(digest);
    persistence.removeAll(digest);
  }

  /** The {@code <upstream>/<repository>} keys {@code digest} is linked to (a snapshot). */
  public Set<String> linksOf(Digest digest) {
    Set<String> keys = links.get(digest);
    return keys == null ? Set.of() : Set.copyOf(keys);
  }

  private static String key(String upstreamKey, String repository) {
    return StorageLayout.safeSegment(upstreamKey) + "/" + repository;
  }
}
