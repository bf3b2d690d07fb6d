package io.registrycache.storage;

import com.github.benmanes.caffeine.cache.Cache;
import com.github.benmanes.caffeine.cache.Caffeine;
import io.registrycache.config.RegistryCacheProperties;
import io.registrycache.oci.Digest;
import io.registrycache.oci.Reference;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.NoSuchFileException;
import java.nio.file.Path;
import java.nio.file.attribute.FileTime;
import java.time.Instant;
import java.util.ArrayList;
import java.util.List;
import java.util.Optional;
import java.util.concurrent.atomic.AtomicLong;
import java.util.stream.Stream;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import org.springframework.stereotype.Component;

/**
 * Manifests by digest — in memory (Caffeine, bounded by total body bytes) and on disk — and tag
 * links (upstream, repository, tag → digest), kept apart from the content.
 *
 * <p>All methods do file-system work and block: call them from a storage scheduler, never from a
 * Netty event loop. {@link #cached} alone is memory-only and safe anywhere.
 */
@Component
public class ManifestStore {

  private static final Logger log = LoggerFactory.getLogger(ManifestStore.class);

  private final StorageLayout layout;
  private final Cache<Digest, StoredManifest> memory;
  private final AtomicLong count = new AtomicLong();
  private final AtomicLong bytes = new AtomicLong();

  public ManifestStore(StorageLayout layout, RegistryCacheProperties properties) throws IOException {
    this.layout = layout;
    this.memory =
        Caffeine.newBuilder()
            .maximumWeight(properties.getManifests().getMemoryMaxBytes())
            .weigher((Digest d, StoredManifest m) -> m.body().length)
            .build();
    long started = System.nanoTime();
    try (Stream<Path> files = Files.walk(layout.manifestsRoot())) {
      files
          .filter(p -> Files.isRegularFile(p) && !p.getFileName().toString().endsWith(".type"))
          .forEach(
              p -> {
                try {
                  bytes.addAndGet(Files.size(p));
                  count.incrementAndGet();
                } catch (IOException e) {
                  log.warn("cannot read {}: {}", p, e.toString());
                }
              });
    }
    log.info(
        "manifest storage: {} manifests, {} bytes, scanned in {} ms",
        count.get(), bytes.get(), (System.nanoTime() - started) / 1_000_000);
  }

  /** A manifest from memory only; never touches the disk. */
  public Optional<StoredManifest> cached(Digest digest) {
    return Optional.ofNullable(memory.getIfPresent(digest));
  }

  /** A manifest from memory, else from disk (then kept in memory). Blocking. */
  public Optional<StoredManifest> find(Digest digest) {
    StoredManifest inMemory = memory.getIfPresent(digest);
    if (inMemory != null) {
      return Optional.of(inMemory);
    }
    try {
      byte[] body = Files.readAllBytes(layout.manifest(digest));
      String mediaType = Files.readString(layout.manifestType(digest), StandardCharsets.UTF_8).trim();
      if (!digest.recompute(body).equals(digest)) {
        // Bit rot or tampering: never serve it; drop it so it is fetched again.
        log.error("stored manifest {} does not match its digest; removing it", digest);
        delete(digest);
        return Optional.empty();
      }
      StoredManifest manifest = new StoredManifest(digest, mediaType, body);
      memory.put(digest, manifest);
      return Optional.of(manifest);
    } catch (NoSuchFileException e) {
      return Optional.empty();
    } catch (IOException e) {
      throw new UncheckedIOException("cannot read manifest " + digest, e);
    }
  }

  /** Stores a manifest whose digest was verified by the caller. Blocking; idempotent. */
  public void put(StoredManifest manifest) {
    Path target = layout.manifest(manifest.digest());
    if (!Files.exists(target)) {
      layout.writeAtomically(
          layout.manifestType(manifest.digest()), (manifest.mediaType() + "\n").getBytes(StandardCharsets.UTF_8));
      layout.writeAtomically(target, manifest.body());
      count.incrementAndGet();
      bytes.addAndGet(manifest.body().length);
    }
    memory.put(manifest.digest(), manifest);
  }

  /** Removes a manifest from memory and disk. Blocking. */
  public void delete(Digest digest) throws IOException {
    memory.invalidate(digest);
    Path p = layout.manifest(digest);
    long size = Files.exists(p) ? Files.size(p) : -1;
    if (Files.deleteIfExists(p) && size >= 0) {
      count.decrementAndGet();
      bytes.addAndGet(-size);
    }
    Files.deleteIfExists(layout.manifestType(digest));
  }

  /** The link of a cached tag, if any. Blocking. */
  public Optional<TagLink> findTag(String upstreamKey, String name, Reference.Tag tag) {
    Path p = layout.tag(upstreamKey, name, tag.name());
    try {
      String value = Files.readString(p, StandardCharsets.UTF_8).trim();
      Instant validatedAt = Files.getLastModifiedTime(p).toInstant();
      return Optional.of(new TagLink(Digest.parse(value), validatedAt));
    } catch (NoSuchFileException e) {
      return Optional.empty();
    } catch (IOException e) {
      throw new UncheckedIOException("cannot read tag link " + p, e);
    }
  }

  /** Points a tag at a digest, validated now. Blocking. */
  public void putTag(String upstreamKey, String name, Reference.Tag tag, Digest digest) {
    layout.writeAtomically(
        layout.tag(upstreamKey, name, tag.name()), (digest + "\n").getBytes(StandardCharsets.UTF_8));
  }

  /** Records that the upstream confirmed a tag link now. Blocking. */
  public void touchTag(String upstreamKey, String name, Reference.Tag tag) {
    try {
      Files.setLastModifiedTime(layout.tag(upstreamKey, name, tag.name()), FileTime.from(Instant.now()));
    } catch (IOException e) {
      log.warn("cannot touch tag link {}:{}: {}", name, tag, e.toString());
    }
  }

  /** Removes a tag link. Blocking. */
  public void deleteTag(String upstreamKey, String name, Reference.Tag tag) {
    StorageLayout.deleteQuietly(layout.tag(upstreamKey, name, tag.name()));
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
    return count.get();
  }

  /** Total bytes of manifests on disk. */
  public long bytes() {
    return bytes.get();
  }
}
