package io.registrycache.storage;

import io.registrycache.oci.Digest;
import java.io.BufferedReader;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.ByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.nio.file.StandardOpenOption;
import java.util.Comparator;
import java.util.LinkedHashMap;
import java.util.LinkedHashSet;
import java.util.Map;
import java.util.Set;
import java.util.function.BiConsumer;
import java.util.stream.Stream;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The content links of one kind on the file system, as one append-only text file {@code
 * links/<kind>.journal}: a line {@code + <digest> <upstream>/<repository>} per link made and {@code
 * - <digest>} when a digest's content left the store. One {@code write} per link instead of an
 * empty file in three new folders ({@code
 * links/<kind>/<algorithm>/<xx>/<hex>/<upstream>/<repository>/_link}, the layout before: about 60
 * more file-system calls per cold image, docs/performance.md).
 *
 * <p>{@link #scan} (at start-up) reads the folders of the old layout if there are any, then the
 * journal, visits the result, and, when some lines are no longer live (removed, repeated,
 * unreadable) or old folders were read, rewrites the journal with only the live links (a temporary
 * file, forced, renamed over it) before removing the old folders. A running service compacts it the
 * same way once it has appended more lines than it held live at the last compaction (at least
 * {@value #COMPACT_AFTER_LINES}), so eviction and re-fetching cannot grow it without bound. Appends
 * are not forced: a link lost to a power failure costs one {@code HEAD} to the upstream when the
 * content is next asked for in that repository ({@link ContentLinks#servable}); it never makes
 * content servable where it was not. A last line cut short by a crash is skipped at the next start.
 * Every method blocks.
 */
final class LinkJournal implements LinkPersistence {

  private static final Logger log = LoggerFactory.getLogger(LinkJournal.class);

  /** Lines appended after which a running service compacts the journal at the earliest. */
  static final int COMPACT_AFTER_LINES = 100_000;

  private final StorageLayout layout;
  private final Path legacy;
  private final Path journal;
  private final int compactAfterLines;
  private FileChannel out;
  private long appended;
  private long liveAtCompaction;

  LinkJournal(StorageLayout layout, String kind) {
    this(layout, kind, COMPACT_AFTER_LINES);
  }

  LinkJournal(StorageLayout layout, String kind, int compactAfterLines) {
    this.compactAfterLines = compactAfterLines;
    this.layout = layout;
    this.legacy = layout.linksRoot().resolve(kind);
    this.journal = layout.linksRoot().resolve(kind + ".journal");
    try {
      Files.createDirectories(layout.linksRoot());
    } catch (IOException e) {
      throw new UncheckedIOException("cannot create " + layout.linksRoot(), e);
    }
  }

  @Override
  public synchronized void scan(BiConsumer<Digest, String> visitor) {
    Map<Digest, Set<String>> links = new LinkedHashMap<>();
    boolean hadLegacy = Files.isDirectory(legacy);
    if (hadLegacy) {
      layout.scanLinks(
          legacy,
          (digest, key) -> links.computeIfAbsent(digest, d -> new LinkedHashSet<>()).add(key));
    }
    Replayed replayed = replay(links);
    links.forEach((digest, keys) -> keys.forEach(key -> visitor.accept(digest, key)));
    long live = links.values().stream().mapToLong(Set::size).sum();
    if (hadLegacy || replayed.lines() != live) {
      compact(links);
    } else {
      liveAtCompaction = live; // nothing to drop: no rewrite (and no fsync) at every start
    }
    if (hadLegacy) {
      deleteTree(legacy);
      log.info("content links moved from {} into {}", legacy, journal);
    }
    if (replayed.skipped() > 0) {
      log.warn(
          "{}: {} unreadable lines skipped (a write cut short by a crash)",
          journal,
          replayed.skipped());
    }
  }

  @Override
  public synchronized void create(Digest digest, String upstreamSegment, String repository)
      throws IOException {
    append("+ " + digest + " " + upstreamSegment + "/" + repository + "\n");
  }

  @Override
  public synchronized void removeAll(Digest digest) {
    try {
      append("- " + digest + "\n");
    } catch (IOException e) {
      log.warn(
          "could not record the removal of the links of {} in {}: {}",
          digest,
          journal,
          e.toString());
    }
  }

  @Override
  public synchronized void close() {
    if (out != null) {
      try {
        out.close();
      } catch (IOException e) {
        log.warn("could not close {}: {}", journal, e.toString());
      }
      out = null;
    }
  }

  private void append(String line) throws IOException {
    if (appended >= Math.max(compactAfterLines, liveAtCompaction)) {
      try {
        Map<Digest, Set<String>> links = new LinkedHashMap<>();
        replay(links);
        compact(links);
      } catch (UncheckedIOException e) {
        // opportunistic: the journal stays correct, only longer; tried again later
        log.warn("could not compact {}: {}", journal, e.getCause().toString());
        appended = 0;
      }
    }
    appended++;
    if (out == null) {
      out =
          FileChannel.open(
              journal,
              StandardOpenOption.CREATE,
              StandardOpenOption.WRITE,
              StandardOpenOption.APPEND);
    }
    ByteBuffer bytes = ByteBuffer.wrap(line.getBytes(StandardCharsets.UTF_8));
    while (bytes.hasRemaining()) {
      out.write(bytes);
    }
  }

  /** How many lines a replay read, and how many of them were unreadable. */
  private record Replayed(long lines, int skipped) {}

  /** Applies the journal's lines to {@code links}. */
  private Replayed replay(Map<Digest, Set<String>> links) {
    if (!Files.exists(journal)) {
      return new Replayed(0, 0);
    }
    long lines = 0;
    int skipped = 0;
    try (BufferedReader in = Files.newBufferedReader(journal, StandardCharsets.UTF_8)) {
      String line;
      while ((line = in.readLine()) != null) {
        lines++;
        try {
          if (line.startsWith("+ ")) {
            int space = line.indexOf(' ', 2);
            String key = line.substring(space + 1);
            if (space < 0 || key.indexOf('/') <= 0 || key.endsWith("/")) {
              throw new IllegalArgumentException(line);
            }
            links
                .computeIfAbsent(Digest.parse(line.substring(2, space)), d -> new LinkedHashSet<>())
                .add(key);
          } else if (line.startsWith("- ")) {
            links.remove(Digest.parse(line.substring(2)));
          } else {
            throw new IllegalArgumentException(line);
          }
        } catch (RuntimeException e) {
          skipped++;
        }
      }
    } catch (IOException e) {
      throw new UncheckedIOException("cannot read " + journal, e);
    }
    return new Replayed(lines, skipped);
  }

  /** Rewrites the journal with {@code links} only. */
  private void compact(Map<Digest, Set<String>> links) {
    Path temp = journal.resolveSibling(journal.getFileName() + ".tmp");
    close();
    long live = 0;
    try {
      try (FileChannel channel =
          FileChannel.open(
              temp,
              StandardOpenOption.CREATE,
              StandardOpenOption.WRITE,
              StandardOpenOption.TRUNCATE_EXISTING)) {
        StringBuilder lines = new StringBuilder();
        for (Map.Entry<Digest, Set<String>> e : links.entrySet()) {
          for (String key : e.getValue()) {
            lines.append("+ ").append(e.getKey()).append(' ').append(key).append('\n');
            live++;
          }
          if (lines.length() > 1 << 16) {
            write(channel, lines);
          }
        }
        write(channel, lines);
        channel.force(true);
      }
      Files.move(
          temp, journal, StandardCopyOption.ATOMIC_MOVE, StandardCopyOption.REPLACE_EXISTING);
      appended = 0;
      liveAtCompaction = live;
    } catch (IOException e) {
      throw new UncheckedIOException("cannot rewrite " + journal, e);
    }
  }

  private static void write(FileChannel channel, StringBuilder lines) throws IOException {
    ByteBuffer bytes = ByteBuffer.wrap(lines.toString().getBytes(StandardCharsets.UTF_8));
    while (bytes.hasRemaining()) {
      channel.write(bytes);
    }
    lines.setLength(0);
  }

  private static void deleteTree(Path dir) {
    try (Stream<Path> s = Files.walk(dir)) {
      s.sorted(Comparator.reverseOrder()).forEach(StorageLayout::deleteQuietly);
    } catch (IOException e) {
      log.warn("could not remove {}: {}", dir, e.toString());
    }
  }
}
