package io.registrycache.storage;

import com.github.benmanes.caffeine.cache.Cache;
import com.github.benmanes.caffeine.cache.Caffeine;
import io.registrycache.config.RegistryCacheProperties;
import io.registrycache.oci.Digest;
import java.io.File;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.file.FileSystems;
import java.nio.file.Files;
import java.nio.file.NoSuchFileException;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.nio.file.attribute.BasicFileAttributes;
import java.time.Duration;
import java.util.UUID;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.Executor;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import java.util.function.BiConsumer;
import java.util.function.Consumer;
import java.util.stream.Stream;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import org.springframework.stereotype.Component;
import org.springframework.util.FileSystemUtils;

/**
 * The on-disk layout of the cache, rooted at {@code registry-cache.storage.path}:
 *
 * <pre>
 * blobs/sha256/ab/abcdef...            blob content, content-addressed
 * manifests/sha256/ab/abcdef...        manifest bytes exactly as the upstream sent them
 * manifests/sha256/ab/abcdef....type   the manifest's media type (one line)
 * tags/&lt;upstream&gt;/&lt;name&gt;/_tags/&lt;tag&gt;  tag link: the manifest digest (one line); mtime = last validated
 * links/&lt;kind&gt;.journal                where a blob or manifest may be served (kind: blobs or
 *                                      manifests): lines "+ &lt;digest&gt; &lt;upstream&gt;/&lt;name&gt;" and
 *                                      "- &lt;digest&gt;"; see {@link LinkJournal}
 * tmp/                                 downloads in progress; emptied at start-up
 * </pre>
 *
 * Everything is written to {@code tmp/} first and moved into place atomically, so a reader never
 * sees a partial file and a crash leaves only {@code tmp/} leftovers. The folder is
 * self-describing: copying it to another machine carries the whole cache.
 */
@Component
public class StorageLayout {

  private static final Logger log = LoggerFactory.getLogger(StorageLayout.class);

  private final Path root;
  private final Path blobs;
  private final Path manifests;
  private final Path tags;
  private final Path links;
  private final Path tmp;

  /** The random part of this layout's temporary file names, ending with {@code -}. */
  private final String tempPrefix = UUID.randomUUID().toString().replace("-", "") + "-";

  private final AtomicLong tempCounter = new AtomicLong();

  /** How many folders {@link #moveIntoPlace} remembers as existing. */
  static final int KNOWN_FOLDERS = 4096;

  /** Folders known to exist: a rename into them needs no {@code mkdir} first. */
  private final Cache<Path, Boolean> knownFolders =
      Caffeine.newBuilder().maximumSize(KNOWN_FOLDERS).build();

  public StorageLayout(RegistryCacheProperties properties) throws IOException {
    this.root = properties.storage().path().toAbsolutePath().normalize();
    this.blobs = root.resolve("blobs");
    this.manifests = root.resolve("manifests");
    this.tags = root.resolve("tags");
    this.links = root.resolve("links");
    this.tmp = root.resolve("tmp");
    for (Path dir : new Path[] {blobs, manifests, tags, links, tmp}) {
      Files.createDirectories(dir);
    }
    int removed = clearTmp();
    log.info("cache storage at {} ({} leftover temporary files removed)", root, removed);
  }

  private int clearTmp() throws IOException {
    int removed = 0;
    try (Stream<Path> leftovers = Files.list(tmp)) {
      for (Path p : (Iterable<Path>) leftovers::iterator) {
        // a folder too: the throw-away store of a start-up warm-up cut off by a crash
        FileSystemUtils.deleteRecursively(p);
        removed++;
      }
    }
    return removed;
  }

  public Path root() {
    return root;
  }

  public Path blobsRoot() {
    return blobs;
  }

  public Path manifestsRoot() {
    return manifests;
  }

  public Path tagsRoot() {
    return tags;
  }

  public Path linksRoot() {
    return links;
  }

  /**
   * Visits every link file below {@code base} ({@code links/<kind>}, the layout before {@link
   * LinkJournal}) with its digest and its {@code <upstream>/<name>} key. Unexpected files are
   * logged and skipped.
   */
  void scanLinks(Path base, BiConsumer<Digest, String> visitor) {
    try (Stream<Path> files = Files.walk(base)) {
      files.forEach(
          p -> {
            if (!p.getFileName().toString().equals("_link")) {
              return;
            }
            try {
              Path rel = base.relativize(p);
              // <algorithm>/<xx>/<hex>/<upstream>/<name...>/_link
              if (rel.getNameCount() < 6) {
                throw new IllegalArgumentException("too short");
              }
              Digest digest = Digest.parse(rel.getName(0) + ":" + rel.getName(2));
              String key = rel.subpath(3, rel.getNameCount() - 1).toString().replace('\\', '/');
              visitor.accept(digest, key);
            } catch (RuntimeException e) {
              log.warn("ignoring unexpected file in {}: {}", base, p);
            }
          });
    } catch (IOException e) {
      throw new UncheckedIOException("cannot scan " + base, e);
    }
  }

  public Path tmpRoot() {
    return tmp;
  }

  /** {@code blobs/<algorithm>/<first two hex>/<hex>}. */
  public Path blob(Digest digest) {
    return contentPath(blobs, digest);
  }

  /** {@code manifests/<algorithm>/<first two hex>/<hex>}. */
  public Path manifest(Digest digest) {
    return contentPath(manifests, digest);
  }

  /** The media type sidecar of a stored manifest. */
  public Path manifestType(Digest digest) {
    Path p = manifest(digest);
    return p.resolveSibling(p.getFileName() + ".type");
  }

  /** {@code tags/<upstream>/<name>/_tags/<tag>}; name components are validated, so no traversal. */
  public Path tag(String upstreamKey, String name, String tag) {
    return tagsDir(upstreamKey, name).resolve(tag);
  }

  /** The folder holding the tag links of one repository. */
  public Path tagsDir(String upstreamKey, String name) {
    return tags.resolve(safeSegment(upstreamKey)).resolve(name).resolve("_tags");
  }

  /**
   * A fresh, unique temporary file path (not created): {@code <purpose>-<prefix>-<n>}, the prefix
   * 122 random bits chosen once per layout (once per process) from {@link UUID#randomUUID}, {@code
   * n} a counter of this layout. So no two processes sharing the folder (replicas on a shared file
   * system, a process restarted with its counter at 0 again) can name the same file, without a
   * {@code SecureRandom} draw per file (0.25 % of a cold pull's CPU).
   */
  public Path newTempFile(String purpose) {
    return tmp.resolve(
        purpose + "-" + tempPrefix + Long.toString(tempCounter.incrementAndGet(), 36));
  }

  /**
   * Writes {@code bytes} to {@code target} through a temporary file and an atomic move.
   *
   * @throws UncheckedIOException when the file system fails
   */
  public void writeAtomically(Path target, byte[] bytes) {
    Path temp = newTempFile("write");
    try {
      Files.write(temp, bytes);
      moveIntoPlace(temp, target);
    } catch (IOException e) {
      deleteQuietly(temp);
      throw new UncheckedIOException("cannot write " + target, e);
    }
  }

  /**
   * Atomically renames {@code temp} to {@code target}, replacing it. Same file system. The target's
   * folder is made first unless it is among the folders known to exist (at most {@value
   * #KNOWN_FOLDERS}; beyond that Caffeine's size eviction drops some), without an exception when it
   * exists or is made: a failed rename or {@code Files.createDirectories} costs a thrown exception
   * with its stack trace, once per blob and manifest stored (4 % of a cold pull's CPU). Nothing in
   * the cache deletes folders today; should one go anyway (by hand, another tool) while it is
   * known, the rename says so, the folder is forgotten, made again and the rename repeated.
   *
   * @throws java.nio.file.NoSuchFileException when {@code temp} does not exist
   * @throws IOException when the folder cannot be made (e.g. a file has its name) or the rename
   *     fails; {@code temp} is then left for the caller to delete
   */
  public void moveIntoPlace(Path temp, Path target) throws IOException {
    Path folder = target.getParent();
    if (knownFolders.getIfPresent(folder) == null) {
      makeFolder(folder);
      knownFolders.put(folder, Boolean.TRUE);
    }
    try {
      Files.move(temp, target, StandardCopyOption.ATOMIC_MOVE, StandardCopyOption.REPLACE_EXISTING);
    } catch (NoSuchFileException e) {
      knownFolders.invalidate(folder);
      if (!Files.exists(temp)) {
        throw e;
      }
      makeFolder(folder);
      Files.move(temp, target, StandardCopyOption.ATOMIC_MOVE, StandardCopyOption.REPLACE_EXISTING);
      knownFolders.put(folder, Boolean.TRUE);
    }
  }

  /**
   * Makes {@code folder} and its missing parents. On the default file system one {@code mkdir} per
   * level through {@link File#mkdir} and {@link File#isDirectory}, which answer with booleans where
   * {@link Files#createDirectories} throws and catches an exception per existing or missing level,
   * and where {@link File#mkdirs} resolves the whole path again ({@code realpath}: a {@code
   * readlink} per component) for every missing level. {@link Files#createDirectories} then only
   * reports why it failed.
   */
  private static void makeFolder(Path folder) throws IOException {
    if (folder.getFileSystem().equals(FileSystems.getDefault()) && makeFolders(folder.toFile())) {
      return;
    }
    Files.createDirectories(folder);
  }

  /** Whether {@code folder} is a folder now, made with its missing parents. */
  private static boolean makeFolders(File folder) {
    if (folder.mkdir() || folder.isDirectory()) {
      return true;
    }
    File parent = folder.getParentFile();
    return parent != null && makeFolders(parent) && (folder.mkdir() || folder.isDirectory());
  }

  /**
   * Visits every content file below {@code base} ({@code <algorithm>/<xx>/<hex>}) with its digest
   * and attributes, one {@code stat} a file, reading no content. Sidecar files (names with a dot)
   * and files whose name is not a digest are logged and skipped.
   *
   * @throws UncheckedIOException when the folder cannot be walked
   */
  public void scanContent(Path base, BiConsumer<Digest, BasicFileAttributes> visitor) {
    try (Stream<Path> files = Files.walk(base)) {
      files.forEach(
          p -> {
            if (p.getFileName().toString().contains(".")) {
              return;
            }
            try {
              BasicFileAttributes attrs = Files.readAttributes(p, BasicFileAttributes.class);
              if (attrs.isRegularFile()) {
                String algorithm = p.getParent().getParent().getFileName().toString();
                visitor.accept(Digest.parse(algorithm + ":" + p.getFileName()), attrs);
              }
            } catch (IOException | RuntimeException e) {
              log.warn("ignoring unexpected file in {}: {}", base, p);
            }
          });
    } catch (IOException e) {
      throw new UncheckedIOException("cannot scan " + base, e);
    }
  }

  /**
   * Runs {@code task} once, {@code delay} from now, on {@code executor}: a delayed delete. Its
   * failure goes to {@code failed} (the task's own exception, unwrapped), so it is logged rather
   * than lost; an executor that refuses it (shut down) drops it without a word.
   */
  public static void later(
      Duration delay, Executor executor, Runnable task, Consumer<Throwable> failed) {
    CompletableFuture.runAsync(
            task,
            CompletableFuture.delayedExecutor(delay.toMillis(), TimeUnit.MILLISECONDS, executor))
        .exceptionally(
            failure -> {
              failed.accept(failure.getCause() == null ? failure : failure.getCause());
              return null;
            });
  }

  /** Deletes a file, logging instead of failing. */
  public static void deleteQuietly(Path path) {
    try {
      Files.deleteIfExists(path);
    } catch (IOException e) {
      log.warn("could not delete {}: {}", path, e.toString());
    }
  }

  private static Path contentPath(Path base, Digest digest) {
    return base.resolve(digest.algorithm())
        .resolve(digest.hex().substring(0, 2))
        .resolve(digest.hex());
  }

  /**
   * {@code s} as one safe path segment: every code point outside {@code [A-Za-z0-9._:-]} becomes
   * one {@code _} (as {@code s.replaceAll("[^A-Za-z0-9._:-]", "_")} does, without compiling and
   * running a regular expression per call: 0.6 % of a cold pull's CPU). {@code s} itself when
   * nothing needs replacing.
   */
  public static String safeSegment(String s) {
    int n = s.length();
    int i = 0;
    while (i < n && isSafe(s.charAt(i))) {
      i++;
    }
    if (i == n) {
      return s;
    }
    StringBuilder out = new StringBuilder(n).append(s, 0, i);
    while (i < n) {
      char c = s.charAt(i);
      if (isSafe(c)) {
        out.append(c);
        i++;
      } else {
        out.append('_');
        i += Character.charCount(s.codePointAt(i)); // a surrogate pair is one code point
      }
    }
    return out.toString();
  }

  private static boolean isSafe(char c) {
    return (c >= 'a' && c <= 'z')
        || (c >= 'A' && c <= 'Z')
        || (c >= '0' && c <= '9')
        || c == '.'
        || c == '_'
        || c == ':'
        || c == '-';
  }
}
