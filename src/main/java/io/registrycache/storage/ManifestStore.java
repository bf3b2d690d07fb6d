package io.registrycache.storage;

import com.github.benmanes.caffeine.cache.Cache;
import com.github.benmanes.caffeine.cache.Caffeine;
import io.registrycache.config.RegistryCacheProperties;
import io.registrycache.oci.Digest;
import io.registrycache.oci.ManifestContent;
import io.registrycache.oci.MediaType;
import io.registrycache.oci.Reference;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.time.Clock;
import java.time.Instant;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicLong;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import org.springframework.beans.factory.annotation.Autowired;
import org.springframework.stereotype.Component;

/**
 * Manifests by digest — in memory (Caffeine, bounded by total body bytes) and durably (on disk, or
 * in the object store with {@code storage.type=s3}: {@link ManifestPersistence}) — and tag links
 * (upstream, repository, tag → digest, with the time the upstream last confirmed it), kept apart
 * from the content.
 *
 * <p>Every stored manifest has an index {@link Entry} in memory (size, stored, last pulled, and
 * once read: media type and references), built at start-up from one {@code stat} per file. A pull
 * ({@link #cached}, {@link #find}) records its time without a lock and touches what the manifest
 * references — the blobs of an image manifest, the child manifests of an index — so that content in
 * use is never the least recently pulled.
 *
 * <p>All methods do file-system work and block: call them from a storage scheduler, never from a
 * Netty event loop. {@link #cached} alone is memory-only and safe anywhere.
 */
@Component
public class ManifestStore {

  private static final Logger log = LoggerFactory.getLogger(ManifestStore.class);

  /** What the index knows of a stored manifest. */
  public static final class Entry extends StoredItem {
    /** Media type and references, once the body was read; {@code null} before. */
    volatile ManifestContent content;

    Entry(long size, long createdMillis, long lastPulledMillis) {
      super(size, createdMillis, lastPulledMillis);
    }
  }

  /** What the index keeps of a manifest: its parsed content, or its type alone when unreadable. */
  static ManifestContent contentOf(MediaType mediaType, byte[] body) {
    try {
      return ManifestContent.parse(body, mediaType);
    } catch (RuntimeException e) {
      return ManifestContent.unreadable(mediaType);
    }
  }

  private final ManifestPersistence persistence;
  private final TagPersistence tags;
  private final BlobStore blobs;
  private final Clock clock;
  private final Cache<Digest, StoredManifest> memory;
  private final Map<Digest, Entry> index = new ConcurrentHashMap<>();
  private final AtomicLong bytes = new AtomicLong();
  private final ContentLinks links;

  /** A store on the file system under {@code layout} ({@link FileManifestPersistence}). */
  public ManifestStore(
      StorageLayout layout, BlobStore blobs, RegistryCacheProperties properties, Clock clock)
      throws IOException {
    this(new FileManifestPersistence(layout), blobs, properties, clock);
  }

  /** Most tag links kept in memory: ~200 bytes each, so about 2 MiB. */
  static final int TAG_LINKS_IN_MEMORY = 10_000;

  private record TagKey(String upstream, String repository, String tag) {}

  /** Tag links seen since start-up, so that a warm tag is served without the disk or the store. */
  private final Cache<TagKey, TagRef> tagLinks;

  /**
   * A store in {@code persistence}.
   *
   * @param persistence where manifests and tag links are kept: the file system or the object store
   *     ({@code storage.type})
   */
  @Autowired
  public ManifestStore(
      ManifestPersistence persistence,
      BlobStore blobs,
      RegistryCacheProperties properties,
      Clock clock)
      throws IOException {
    this.persistence = persistence;
    this.tags = persistence.tags();
    this.blobs = blobs;
    this.clock = clock;
    this.tagLinks = Caffeine.newBuilder().maximumSize(TAG_LINKS_IN_MEMORY).build();
    this.memory =
        Caffeine.newBuilder()
            .maximumWeight(properties.manifests().memoryMaxBytes())
            .weigher((Digest d, StoredManifest m) -> m.body().length)
            .build();
    long started = System.nanoTime();
    persistence.scan(
        found -> {
          if (index.put(
                  found.digest(),
                  new Entry(found.size(), found.createdMillis(), found.lastPulledMillis()))
              == null) {
            bytes.addAndGet(found.size());
          }
        });
    log.info(
        "manifest storage: {} manifests, {} bytes, scanned in {} ms",
        index.size(),
        bytes.get(),
        (System.nanoTime() - started) / 1_000_000);
    this.links =
        new ContentLinks(
            persistence.links(),
            "manifests",
            properties.storage().contentScope(),
            index::containsKey);
  }

  /**
   * Where stored manifests may be served by digest. A tag link is a link of its manifest in its
   * repository too; a deleted manifest loses its links.
   */
  public ContentLinks links() {
    return links;
  }

  /** A manifest from memory only; never touches the disk. Records a pull when found. */
  public Optional<StoredManifest> cached(Digest digest) {
    StoredManifest m = memory.getIfPresent(digest);
    if (m != null) {
      pulled(m);
    }
    return Optional.ofNullable(m);
  }

  /** A manifest from memory, else from disk (then kept in memory). Records a pull. Blocking. */
  public Optional<StoredManifest> find(Digest digest) {
    Optional<StoredManifest> m = read(digest);
    m.ifPresent(this::pulled);
    return m;
  }

  private Optional<StoredManifest> read(Digest digest) {
    StoredManifest inMemory = memory.getIfPresent(digest);
    if (inMemory != null) {
      return Optional.of(inMemory);
    }
    try {
      Optional<ManifestPersistence.Stored> stored = persistence.read(digest);
      if (stored.isEmpty()) {
        return Optional.empty();
      }
      byte[] body = stored.get().body();
      MediaType mediaType;
      try {
        mediaType = MediaType.parse(stored.get().mediaType());
      } catch (IllegalArgumentException e) {
        log.error("stored manifest {} has an unreadable media type; removing it", digest);
        delete(digest);
        return Optional.empty();
      }
      StoredManifest manifest;
      try {
        manifest = new StoredManifest(digest, mediaType, body);
      } catch (ContentVerificationException e) {
        // Bit rot or tampering: never serve it; drop it so it is fetched again.
        log.error("stored manifest {} does not match its digest; removing it", digest);
        delete(digest);
        return Optional.empty();
      }
      if (!index.containsKey(digest) && blobs.shared()) {
        // Stored by another replica on a shared store since the last scan: indexed now, so its
        // pulls here are recorded (taken as not persisted) and the budget counts it.
        long now = clock.millis();
        if (index.putIfAbsent(digest, new Entry(body.length, now, now)) == null) {
          bytes.addAndGet(body.length);
          index.get(digest).persistedMillis = 0;
        }
      }
      memory.put(digest, manifest);
      return Optional.of(manifest);
    } catch (IOException e) {
      throw new UncheckedIOException("cannot read manifest " + digest, e);
    }
  }

  /** Records a pull of {@code m} now: its entry, and what it references. Lock-free. */
  private void pulled(StoredManifest m) {
    Entry e = index.get(m.digest());
    if (e == null) {
      return;
    }
    long now = clock.millis();
    if (!e.touch(now)) {
      return;
    }
    ManifestContent content = e.content;
    if (content == null) {
      content = contentOf(m.mediaType(), m.body());
      e.content = content;
    }
    for (Digest ref : content.referencedDigests()) {
      Entry child = index.get(ref);
      if (child != null) {
        child.lastPulledMillis = Math.max(child.lastPulledMillis, now);
      } else {
        blobs.touch(ref);
      }
    }
  }

  /**
   * Stores a manifest (verified when it was made: {@link StoredManifest}). Blocking; idempotent.
   */
  public void put(StoredManifest manifest) {
    put(manifest, null);
  }

  /**
   * Stores a manifest whose references the caller has parsed already (parsed once per fetch).
   * Blocking; idempotent.
   *
   * @param content its media type and references, or null to parse them here
   */
  public void put(StoredManifest manifest, ManifestContent content) {
    store(manifest, content);
  }

  /** Makes a verified manifest visible: disk, index, memory. */
  private void store(StoredManifest manifest, ManifestContent parsed) {
    try {
      persistence.write(manifest.digest(), manifest.mediaType(), manifest.body());
    } catch (IOException e) {
      throw new UncheckedIOException("cannot store manifest " + manifest.digest(), e);
    }
    long now = clock.millis();
    Entry[] fresh = new Entry[1];
    index.computeIfAbsent(
        manifest.digest(),
        d -> {
          fresh[0] = new Entry(manifest.body().length, now, now);
          fresh[0].content =
              parsed != null ? parsed : contentOf(manifest.mediaType(), manifest.body());
          bytes.addAndGet(manifest.body().length);
          return fresh[0];
        });
    memory.put(manifest.digest(), manifest);
    pulled(manifest);
  }

  /** Removes a manifest from the index, memory and disk. Blocking. */
  public void delete(Digest digest) throws IOException {
    Entry e = index.remove(digest);
    if (e != null) {
      bytes.addAndGet(-e.size);
    }
    memory.invalidate(digest);
    links.unlinkAll(digest);
    persistence.delete(digest);
  }

  /** The index entry of a stored manifest. */
  public Optional<Entry> entry(Digest digest) {
    return Optional.ofNullable(index.get(digest));
  }

  /** Digests of every stored manifest (a snapshot). */
  public List<Digest> digests() {
    return new ArrayList<>(index.keySet());
  }

  /**
   * Media type and references of a stored manifest, read from disk once and then kept in the index;
   * records no pull (the file's access time is put back). Blocking.
   *
   * @return empty when the manifest is not stored
   */
  public Optional<ManifestContent> content(Digest digest) {
    Entry e = index.get(digest);
    if (e == null) {
      return Optional.empty();
    }
    ManifestContent c = e.content;
    if (c != null) {
      return Optional.of(c);
    }
    Optional<StoredManifest> m = read(digest);
    if (m.isEmpty()) {
      return Optional.empty();
    }
    persistence.recordPull(digest, e.persistedMillis); // reading was no pull
    c = contentOf(m.get().mediaType(), m.get().body());
    e.content = c;
    return Optional.of(c);
  }

  /**
   * Writes changed last-pulled times to the files' access times, read back at start-up.
   *
   * @return how many files were updated
   */
  public int persistAccessTimes() {
    int n = 0;
    for (Map.Entry<Digest, Entry> me : index.entrySet()) {
      Entry e = me.getValue();
      long pulled = e.lastPulledMillis;
      if (pulled > e.persistedMillis) {
        persistence.recordPull(me.getKey(), pulled);
        e.persistedMillis = pulled;
        n++;
      }
    }
    return n;
  }

  /** Every tag link, all upstreams and repositories. Blocking. */
  public List<TagRef> allTags() {
    return tags.all();
  }

  /** Removes the tag link of {@code ref} if it still points at the same digest. Blocking. */
  public boolean deleteTag(TagRef ref) {
    Optional<TagRef> now = tags.find(ref.upstream(), ref.repository(), ref.tag());
    if (now.isEmpty() || !now.get().digest().equals(ref.digest())) {
      return false; // moved by a pull meanwhile (or gone): it is not what was selected
    }
    tagLinks.invalidate(new TagKey(ref.upstream(), ref.repository(), ref.tag()));
    tags.delete(ref.upstream(), ref.repository(), ref.tag());
    return true;
  }

  /** The link of a cached tag, if any: from memory, else from the persistence. Blocking. */
  public Optional<TagRef> findTag(String upstreamKey, String name, Reference.Tag tag) {
    TagKey key = new TagKey(upstreamKey, name, tag.name());
    TagRef inMemory = tagLinks.getIfPresent(key);
    if (inMemory != null) {
      return Optional.of(inMemory);
    }
    Optional<TagRef> stored = tags.find(upstreamKey, name, tag.name());
    stored.ifPresent(ref -> tagLinks.put(key, ref));
    return stored;
  }

  /**
   * The link of a cached tag from memory only (a tag looked up, stored or confirmed since start-up
   * and not pushed out of the {@value #TAG_LINKS_IN_MEMORY} most recent); never touches the disk.
   */
  public Optional<TagRef> cachedTag(String upstreamKey, String name, Reference.Tag tag) {
    return Optional.ofNullable(tagLinks.getIfPresent(new TagKey(upstreamKey, name, tag.name())));
  }

  /** Points a tag at a digest, confirmed by the upstream at {@code validatedAt}. Blocking. */
  public void putTag(
      String upstreamKey, String name, Reference.Tag tag, Digest digest, Instant validatedAt) {
    tags.put(upstreamKey, name, tag.name(), digest, validatedAt);
    tagLinks.put(
        new TagKey(upstreamKey, name, tag.name()),
        new TagRef(upstreamKey, name, tag.name(), digest, validatedAt));
  }

  /** Records that the upstream confirmed a tag link at {@code validatedAt}. Blocking. */
  public void touchTag(String upstreamKey, String name, Reference.Tag tag, Instant validatedAt) {
    tags.touch(upstreamKey, name, tag.name(), validatedAt);
    TagKey key = new TagKey(upstreamKey, name, tag.name());
    TagRef known = tagLinks.getIfPresent(key);
    if (known != null) {
      tagLinks.put(key, new TagRef(upstreamKey, name, tag.name(), known.digest(), validatedAt));
    }
  }

  /** Removes a tag link. Blocking. */
  public void deleteTag(String upstreamKey, String name, Reference.Tag tag) {
    tagLinks.invalidate(new TagKey(upstreamKey, name, tag.name()));
    tags.delete(upstreamKey, name, tag.name());
  }

  /** The cached tags of a repository, in lexical order. Blocking. */
  public List<String> tags(String upstreamKey, String name) {
    return tags.list(upstreamKey, name);
  }

  /**
   * Brings the index up to date with a store other replicas write too (a shared bucket): manifests
   * they stored are added, manifests whose objects are gone are dropped (only those indexed before
   * the listing began), and a later last pull the store reports is taken. Blocking.
   *
   * @return manifests added plus manifests dropped
   */
  @SuppressWarnings("ModifyCollectionInEnhancedForLoop") // index is a ConcurrentHashMap
  public int rescan() {
    long started = clock.millis();
    Set<Digest> seen = new HashSet<>();
    int[] changed = {0};
    persistence.scan(
        found -> {
          seen.add(found.digest());
          Entry e =
              index.computeIfAbsent(
                  found.digest(),
                  d -> {
                    bytes.addAndGet(found.size());
                    changed[0]++;
                    return new Entry(found.size(), found.createdMillis(), found.lastPulledMillis());
                  });
          if (found.lastPulledMillis() > e.lastPulledMillis) {
            e.lastPulledMillis = found.lastPulledMillis();
            e.persistedMillis = Math.max(e.persistedMillis, found.lastPulledMillis());
          }
        });
    for (Map.Entry<Digest, Entry> me : index.entrySet()) {
      Entry e = me.getValue();
      if (!seen.contains(me.getKey())
          && e.createdMillis() < started
          && index.remove(me.getKey(), e)) {
        bytes.addAndGet(-e.size);
        memory.invalidate(me.getKey());
        changed[0]++;
      }
    }
    if (changed[0] > 0) {
      log.info(
          "manifest index rescanned: {} changes, {} manifests, {} bytes",
          changed[0],
          index.size(),
          bytes.get());
    }
    return changed[0];
  }

  /** Number of manifests on disk. */
  public long count() {
    return index.size();
  }

  /** Total bytes of manifests on disk. */
  public long bytes() {
    return bytes.get();
  }
}
