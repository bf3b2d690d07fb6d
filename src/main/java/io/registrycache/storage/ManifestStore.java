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
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.NoSuchFileException;
import java.nio.file.Path;
import java.nio.file.attribute.BasicFileAttributeView;
import java.nio.file.attribute.FileTime;
import java.time.Clock;
import java.time.Instant;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicLong;
import java.util.stream.Stream;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import org.springframework.beans.factory.annotation.Autowired;
import org.springframework.stereotype.Component;

/**
 * Manifests by digest — in memory (Caffeine, bounded by total body bytes) and on disk — and tag
 * links (upstream, repository, tag → digest), kept apart from the content.
 *
 * <p>Every stored manifest has an index {@link Entry} in memory (size, stored, last pulled, and
 * once read: media type and references), built at start-up from one {@code stat} per file. A pull
 * ({@link #cached}, {@link #find}) records its time without a lock and touches what the manifest
 * references — the blobs of an image manifest, the child manifests of an index — so that content
 * in use is never the least recently pulled.
 *
 * <p>Tag links read or written are also kept in memory (at most {@value #TAG_LINKS_IN_MEMORY}
 * links, least recently used dropped), so that a warm tag is served without touching the disk
 * ({@link #cachedTag}). Every tag change goes through this class, which keeps the copy in step.
 *
 * <p>All methods do file-system work and block: call them from a storage scheduler, never from a
 * Netty event loop. {@link #cached} and {@link #cachedTag} alone are memory-only and safe anywhere.
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

  /**
   * A tag link on disk: where a cached tag points, and when the upstream last confirmed it.
   *
   * @param upstream the upstream's configuration key
   * @param repository the repository name
   * @param tag the tag
   * @param digest the manifest it points at
   * @param validatedAt when the upstream last confirmed it
   */
  public record TagRef(String upstream, String repository, String tag, Digest digest, Instant validatedAt) {
    /** {@code <upstream>/<repository>:<tag>}, what prune patterns match. */
    public String image() {
      return upstream + "/" + repository + ":" + tag;
    }
  }

  private final StorageLayout layout;
  private final BlobStore blobs;
  private final Clock clock;
  private final Cache<Digest, StoredManifest> memory;
  private final Map<Digest, Entry> index = new ConcurrentHashMap<>();

  /** How many tag links {@link #cachedTag} keeps in memory (about 200 bytes each). */
  public static final int TAG_LINKS_IN_MEMORY = 20_000;

  private record TagKey(String upstream, String repository, String tag) {}

  /** Memory copy of tag links on disk; changed only after the disk, see {@link #remember}. */
  private final Cache<TagKey, TagRef> tagLinks = Caffeine.newBuilder().maximumSize(TAG_LINKS_IN_MEMORY).build();

  /** Counts tag-link changes, so that a read racing a change never leaves a stale copy. */
  private final AtomicLong tagChanges = new AtomicLong();
  private final AtomicLong bytes = new AtomicLong();
  private final ContentLinks links;

  @Autowired
  public ManifestStore(StorageLayout layout, BlobStore blobs, RegistryCacheProperties properties, Clock clock)
      throws IOException {
    this.layout = layout;
    this.blobs = blobs;
    this.clock = clock;
    this.memory =
        Caffeine.newBuilder()
            .maximumWeight(properties.manifests().memoryMaxBytes())
            .weigher((Digest d, StoredManifest m) -> m.body().length)
            .build();
    long started = System.nanoTime();
    layout.scanContent(
        layout.manifestsRoot(),
        (digest, attrs) -> {
          long created = attrs.lastModifiedTime().toMillis();
          long pulled = Math.max(created, attrs.lastAccessTime().toMillis());
          index.put(digest, new Entry(attrs.size(), created, pulled));
          bytes.addAndGet(attrs.size());
        });
    log.info(
        "manifest storage: {} manifests, {} bytes, scanned in {} ms",
        index.size(), bytes.get(), (System.nanoTime() - started) / 1_000_000);
    this.links = new ContentLinks(layout, "manifests", properties.storage().contentScope(), index::containsKey);
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
      byte[] body = Files.readAllBytes(layout.manifest(digest));
      MediaType mediaType;
      try {
        mediaType = MediaType.parse(Files.readString(layout.manifestType(digest), StandardCharsets.UTF_8).trim());
      } catch (IllegalArgumentException e) {
        log.error("stored manifest {} has an unreadable media type; removing it", digest);
        delete(digest);
        return Optional.empty();
      }
      if (!digest.recompute(body).equals(digest)) {
        // Bit rot or tampering: never serve it; drop it so it is fetched again.
        log.error("stored manifest {} does not match its digest; removing it", digest);
        delete(digest);
        return Optional.empty();
      }
      StoredManifest manifest = new StoredManifest(digest, mediaType, body);
      if (index.containsKey(digest)) {
        memory.put(digest, manifest);
      }
      return Optional.of(manifest);
    } catch (NoSuchFileException e) {
      return Optional.empty();
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
   * A writer for manifest {@code digest} of {@code mediaType}: append, then commit(expected size),
   * which verifies the bytes and stores them ({@link ContentWriter}). Blocking on commit.
   */
  public ContentWriter newWriter(Digest digest, MediaType mediaType) {
    return new ManifestWriter(this, digest, mediaType);
  }

  /**
   * Stores a manifest after checking its bytes against its digest, through a {@link #newWriter}.
   * Blocking; idempotent.
   *
   * @throws ContentVerificationException when the body does not have the manifest's digest;
   *     nothing is stored
   */
  public void put(StoredManifest manifest) {
    ContentWriter writer = newWriter(manifest.digest(), manifest.mediaType());
    try {
      writer.append(java.nio.ByteBuffer.wrap(manifest.body()));
      writer.commit(manifest.body().length);
    } catch (IOException e) {
      throw new UncheckedIOException("cannot store manifest " + manifest.digest(), e);
    }
  }

  /** Makes a verified manifest visible: disk, index, memory. Called by its writer's commit. */
  void store(StoredManifest manifest) {
    Path target = layout.manifest(manifest.digest());
    if (!Files.exists(target)) {
      layout.writeAtomically(
          layout.manifestType(manifest.digest()), (manifest.mediaType() + "\n").getBytes(StandardCharsets.UTF_8));
      layout.writeAtomically(target, manifest.body());
    }
    long now = clock.millis();
    Entry[] fresh = new Entry[1];
    index.computeIfAbsent(
        manifest.digest(),
        d -> {
          fresh[0] = new Entry(manifest.body().length, now, now);
          fresh[0].content = contentOf(manifest.mediaType(), manifest.body());
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
    Files.deleteIfExists(layout.manifest(digest));
    Files.deleteIfExists(layout.manifestType(digest));
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
   * Media type and references of a stored manifest, read from disk once and then kept in the
   * index; records no pull (the file's access time is put back). Blocking.
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
    restoreAccessTime(digest, e.persistedMillis);
    c = contentOf(m.get().mediaType(), m.get().body());
    e.content = c;
    return Optional.of(c);
  }

  private void restoreAccessTime(Digest digest, long millis) {
    try {
      Files.getFileAttributeView(layout.manifest(digest), BasicFileAttributeView.class)
          .setTimes(null, FileTime.fromMillis(millis), null);
    } catch (IOException ignored) {
      // only the eviction order after a restart depends on it
    }
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
        restoreAccessTime(me.getKey(), pulled);
        e.persistedMillis = pulled;
        n++;
      }
    }
    return n;
  }

  /** Every tag link on disk, all upstreams and repositories. Blocking. */
  public List<TagRef> allTags() {
    Path root = layout.tagsRoot();
    List<TagRef> out = new ArrayList<>();
    try (Stream<Path> files = Files.walk(root)) {
      for (Path p : (Iterable<Path>) files::iterator) {
        Path parent = p.getParent();
        if (parent == null || !parent.getFileName().toString().equals("_tags") || !Files.isRegularFile(p)) {
          continue;
        }
        Path rel = root.relativize(parent.getParent());
        if (rel.getNameCount() < 2) {
          continue;
        }
        String upstream = rel.getName(0).toString();
        String repository = rel.subpath(1, rel.getNameCount()).toString().replace('\\', '/');
        try {
          String value = Files.readString(p, StandardCharsets.UTF_8).trim();
          out.add(new TagRef(upstream, repository, p.getFileName().toString(), Digest.parse(value),
              Files.getLastModifiedTime(p).toInstant()));
        } catch (NoSuchFileException e) {
          // removed meanwhile
        } catch (IOException | RuntimeException e) {
          log.warn("ignoring unreadable tag link {}: {}", p, e.toString());
        }
      }
    } catch (IOException e) {
      throw new UncheckedIOException("cannot list tag links", e);
    }
    return out;
  }

  /** Removes the tag link of {@code ref} if it still points at the same digest. Blocking. */
  public boolean deleteTag(TagRef ref) {
    Path p = layout.tag(ref.upstream(), ref.repository(), ref.tag());
    try {
      String value = Files.readString(p, StandardCharsets.UTF_8).trim();
      if (!value.equals(ref.digest().toString())) {
        return false; // moved by a pull meanwhile: it is not what was selected
      }
      Files.deleteIfExists(p);
      forgetTag(ref.upstream(), ref.repository(), ref.tag());
      return true;
    } catch (NoSuchFileException e) {
      return false;
    } catch (IOException e) {
      throw new UncheckedIOException("cannot delete tag link " + p, e);
    }
  }

  /**
   * The link of a cached tag from memory only ({@code validatedAt} as the link file's modification
   * time); empty when it is not in memory, whether or not it is on disk. Never touches the disk.
   */
  public Optional<TagRef> cachedTag(String upstreamKey, String name, Reference.Tag tag) {
    return Optional.ofNullable(tagLinks.getIfPresent(new TagKey(upstreamKey, name, tag.name())));
  }

  /** The link of a cached tag, if any, read from disk (then kept in memory). Blocking. */
  public Optional<TagRef> findTag(String upstreamKey, String name, Reference.Tag tag) {
    Path p = layout.tag(upstreamKey, name, tag.name());
    long changes = tagChanges.get();
    try {
      String value = Files.readString(p, StandardCharsets.UTF_8).trim();
      Instant validatedAt = Files.getLastModifiedTime(p).toInstant();
      TagRef ref = new TagRef(upstreamKey, name, tag.name(), Digest.parse(value), validatedAt);
      remember(ref, changes);
      return Optional.of(ref);
    } catch (NoSuchFileException e) {
      return Optional.empty();
    } catch (IOException e) {
      throw new UncheckedIOException("cannot read tag link " + p, e);
    }
  }

  /**
   * Keeps a link read from disk in memory, unless a writer got there first. Writers change the disk,
   * then count the change, then the memory; a read that saw {@code changesBefore} changes and finds
   * more afterwards may have read an older disk state, so its copy is dropped (correct, at worst one
   * more disk read).
   */
  private void remember(TagRef ref, long changesBefore) {
    TagKey key = new TagKey(ref.upstream(), ref.repository(), ref.tag());
    tagLinks.asMap().putIfAbsent(key, ref);
    if (tagChanges.get() != changesBefore) {
      tagLinks.invalidate(key);
    }
  }

  /** Points a tag at a digest, validated now. Blocking. */
  public void putTag(String upstreamKey, String name, Reference.Tag tag, Digest digest) {
    Instant now = Instant.now();
    layout.writeAtomically(
        layout.tag(upstreamKey, name, tag.name()), (digest + "\n").getBytes(StandardCharsets.UTF_8));
    tagChanges.incrementAndGet();
    tagLinks.put(new TagKey(upstreamKey, name, tag.name()), new TagRef(upstreamKey, name, tag.name(), digest, now));
  }

  /** Records that the upstream confirmed a tag link now. Blocking. */
  public void touchTag(String upstreamKey, String name, Reference.Tag tag) {
    Instant now = Instant.now();
    try {
      Files.setLastModifiedTime(layout.tag(upstreamKey, name, tag.name()), FileTime.from(now));
    } catch (IOException e) {
      log.warn("cannot touch tag link {}:{}: {}", name, tag, e.toString());
      forgetTag(upstreamKey, name, tag.name());
      return;
    }
    tagChanges.incrementAndGet();
    tagLinks.asMap().computeIfPresent(
        new TagKey(upstreamKey, name, tag.name()),
        (k, ref) -> new TagRef(ref.upstream(), ref.repository(), ref.tag(), ref.digest(), now));
  }

  /** Removes a tag link. Blocking. */
  public void deleteTag(String upstreamKey, String name, Reference.Tag tag) {
    StorageLayout.deleteQuietly(layout.tag(upstreamKey, name, tag.name()));
    forgetTag(upstreamKey, name, tag.name());
  }

  private void forgetTag(String upstreamKey, String name, String tag) {
    tagChanges.incrementAndGet();
    tagLinks.invalidate(new TagKey(upstreamKey, name, tag));
  }

  /** The cached tags of a repository, in lexical order. Blocking. */
  public List<String> tags(String upstreamKey, String name) {
    Path dir = layout.tagsDir(upstreamKey, name);
    if (!Files.isDirectory(dir)) {
      return List.of();
    }
    try (Stream<Path> s = Files.list(dir)) {
      List<String> tags = new ArrayList<>(s.map(p -> p.getFileName().toString()).toList());
      tags.sort(null);
      return tags;
    } catch (IOException e) {
      throw new UncheckedIOException("cannot list " + dir, e);
    }
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
