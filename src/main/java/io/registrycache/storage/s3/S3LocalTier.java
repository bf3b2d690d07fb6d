package io.registrycache.storage.s3;

import com.github.benmanes.caffeine.cache.Cache;
import com.github.benmanes.caffeine.cache.Caffeine;
import com.github.benmanes.caffeine.cache.RemovalCause;
import io.registrycache.oci.Digest;
import io.registrycache.storage.StorageLayout;
import io.registrycache.storage.StoredContent;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.security.MessageDigest;
import java.time.Duration;
import java.util.Map;
import java.util.Optional;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.Executors;
import java.util.concurrent.RejectedExecutionException;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.function.Function;
import java.util.stream.Stream;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The optional local disk tier of the object store ({@code storage.s3.local-tier-size} &gt; 0):
 * verified copies of blobs on the replica's own disk, in the file-system store's layout under
 * {@code storage.path} ({@code blobs/<algorithm>/<xx>/<hex>}), served zero-copy ({@code sendfile})
 * instead of through a GET of the object. At most {@code local-tier-size} bytes: Caffeine's
 * size-bounded eviction (Window TinyLFU, recency and frequency) picks what leaves, and an evicted
 * copy's file is deleted after the delete grace (a transfer that has just opened it finishes). A
 * copy appears in two ways: a fill's verified temporary file is hard-linked in when it commits; a
 * blob served from the bucket is downloaded once in the background, at most {@value #DOWNLOADERS}
 * at a time, and moved into place only when its size and digest check out (a copy that does not is
 * deleted, never served). The object stays the truth: a blob that leaves the store's index leaves
 * the tier, and start-up keeps only the copies of indexed blobs of the indexed size.
 */
final class S3LocalTier {

  private static final Logger log = LoggerFactory.getLogger(S3LocalTier.class);

  /** Background downloads into the tier at once, at most. */
  static final int DOWNLOADERS = 2;

  private static final Duration DOWNLOAD_TIMEOUT = Duration.ofMinutes(30);

  private final S3Objects objects;
  private final StorageLayout layout;
  private final long maxBytes;
  private final Duration deleteGrace;

  /**
   * Size in bytes of the stored blob, when it is indexed; empty when the store no longer has it.
   */
  private final Function<Digest, Optional<Long>> storedSize;

  /**
   * Copies in the tier: digest → size in bytes. Weighed in KiB (a weight is an int; blobs may
   * exceed 2 GiB).
   */
  private final Cache<Digest, Long> copies;

  private final Set<Digest> downloading = ConcurrentHashMap.newKeySet();
  private final ScheduledExecutorService executor;
  private final AtomicInteger rejected = new AtomicInteger();

  /** Orders a copy's move into place against its deletion. */
  private final Object lock = new Object();

  /**
   * Loads the copies already on disk (those of blobs in the store's index, of the indexed size; the
   * rest are deleted). Blocking (start-up).
   *
   * @param objects the bucket, to download copies from
   * @param layout where the copies live ({@link StorageLayout#blob}) and their temporary files
   * @param maxBytes the tier's size in bytes, &gt; 0
   * @param deleteGrace how long an evicted copy's file stays for transfers that opened it
   * @param storedSize the store's index: a blob's size, empty when it is not stored
   */
  S3LocalTier(
      S3Objects objects,
      StorageLayout layout,
      long maxBytes,
      Duration deleteGrace,
      Function<Digest, Optional<Long>> storedSize) {
    this.objects = objects;
    this.layout = layout;
    this.maxBytes = maxBytes;
    this.deleteGrace = deleteGrace;
    this.storedSize = storedSize;
    this.executor =
        Executors.newScheduledThreadPool(
            DOWNLOADERS,
            r -> {
              Thread t = new Thread(r, "s3-local-tier");
              t.setDaemon(true);
              return t;
            });
    this.copies =
        Caffeine.newBuilder()
            .maximumWeight(Math.max(1, maxBytes / 1024))
            .weigher(
                (Digest d, Long size) -> (int) Math.min(Integer.MAX_VALUE, (size + 1023) / 1024))
            .executor(Runnable::run)
            .removalListener(
                (Digest d, Long size, RemovalCause cause) -> {
                  if (d != null && cause != RemovalCause.REPLACED) {
                    deleteLater(d);
                  }
                })
            .build();
    load();
  }

  private void load() {
    Path root = layout.blobsRoot();
    if (!Files.isDirectory(root)) {
      return;
    }
    int kept = 0;
    int dropped = 0;
    try (Stream<Path> files = Files.walk(root)) {
      for (Path p : (Iterable<Path>) files.filter(Files::isRegularFile)::iterator) {
        Path rel = root.relativize(p);
        Optional<Long> size = Optional.empty();
        Digest digest = null;
        if (rel.getNameCount() == 3
            && Digest.looksLikeDigest(rel.getName(0) + ":" + rel.getName(2))) {
          try {
            digest = Digest.parse(rel.getName(0) + ":" + rel.getName(2));
            size = storedSize.apply(digest);
          } catch (RuntimeException e) {
            digest = null;
          }
        }
        if (digest != null && size.isPresent() && size.get() == Files.size(p)) {
          copies.put(digest, size.get());
          kept++;
        } else {
          StorageLayout.deleteQuietly(p);
          dropped++;
        }
      }
    } catch (IOException e) {
      log.warn("local tier: cannot load {}, starting with what was read: {}", root, e.toString());
    }
    copies.cleanUp();
    log.info(
        "local tier in {}: {} copies kept, {} dropped (not in the store), {} bytes of at most {}",
        root,
        kept,
        dropped,
        bytes(),
        maxBytes);
  }

  /** The local copy of a stored blob of {@code size} bytes, when the tier has it. */
  Optional<StoredContent> open(Digest digest, long size) {
    Long copy = copies.getIfPresent(digest);
    return copy != null && copy == size
        ? Optional.of(new StoredContent.File(digest, layout.blob(digest), size))
        : Optional.empty();
  }

  /**
   * Takes a fill's verified file into the tier by a hard link (a copy where the file system has
   * none); the file itself stays the fill's. Failures are logged: the tier is an optimisation.
   */
  void adopt(Digest digest, Path verified, long size) {
    if (size > maxBytes || copies.getIfPresent(digest) != null) {
      return;
    }
    Path temp = layout.newTempFile("tier-" + digest.hex().substring(0, 12));
    try {
      try {
        Files.createLink(temp, verified);
      } catch (IOException | UnsupportedOperationException e) {
        Files.copy(verified, temp);
      }
      place(digest, temp, size);
    } catch (IOException e) {
      log.warn("local tier: cannot keep a copy of {}: {}", digest, e.toString());
    } finally {
      StorageLayout.deleteQuietly(temp);
    }
  }

  /**
   * Starts a background download of a stored blob into the tier, unless one is running or the blob
   * is larger than the tier. Returns at once.
   */
  void fillLater(Digest digest, long size) {
    if (size > maxBytes || !downloading.add(digest)) {
      return;
    }
    try {
      executor.execute(() -> download(digest, size));
    } catch (RejectedExecutionException e) {
      downloading.remove(digest); // closing
    }
  }

  private void download(Digest digest, long size) {
    Path temp = layout.newTempFile("tier-" + digest.hex().substring(0, 12));
    try {
      objects.download(S3BlobBackend.key(digest), temp).block(DOWNLOAD_TIMEOUT);
      long actual = Files.size(temp);
      if (actual != size || !digest.matches(hash(digest, temp))) {
        rejected.incrementAndGet();
        log.warn(
            "local tier: the object of {} does not match its digest or size ({} bytes, {} expected); not kept",
            digest,
            actual,
            size);
        return;
      }
      place(digest, temp, size);
    } catch (IOException | RuntimeException e) {
      log.warn("local tier: cannot download {} from the object store: {}", digest, e.toString());
    } finally {
      StorageLayout.deleteQuietly(temp);
      downloading.remove(digest);
    }
  }

  private static MessageDigest hash(Digest digest, Path file) throws IOException {
    MessageDigest md = digest.newMessageDigest();
    ByteBuffer buffer = ByteBuffer.allocate(64 * 1024);
    try (FileChannel channel = FileChannel.open(file, StandardOpenOption.READ)) {
      while (channel.read(buffer) >= 0) {
        buffer.flip();
        md.update(buffer);
        buffer.clear();
      }
    }
    return md;
  }

  /** Moves a verified temporary file into place, if the store still has the blob at that size. */
  private void place(Digest digest, Path temp, long size) throws IOException {
    synchronized (lock) {
      if (!storedSize.apply(digest).equals(Optional.of(size))) {
        return; // evicted meanwhile
      }
      layout.moveIntoPlace(temp, layout.blob(digest));
      copies.put(digest, size);
    }
  }

  /** Drops the copy of a blob that left the store (its file goes after the delete grace). */
  void remove(Digest digest) {
    copies.invalidate(digest);
  }

  /**
   * Deletes the local copy of a blob that left the tier after the delete grace, unless it came back
   * meanwhile. Nothing waits for it, so a failure is logged here (WARN, with the digest); after
   * {@link #close} the delete is dropped.
   */
  private void deleteLater(Digest digest) {
    StorageLayout.later(
        deleteGrace,
        executor,
        () -> {
          synchronized (lock) {
            if (!copies.asMap().containsKey(digest)) {
              StorageLayout.deleteQuietly(layout.blob(digest));
            }
          }
        },
        failure ->
            log.warn("local tier: cannot delete the copy of {}: {}", digest, failure.toString()));
  }

  /** Bytes of the copies in the tier. */
  long bytes() {
    copies.cleanUp();
    long sum = 0;
    for (Map.Entry<Digest, Long> e : copies.asMap().entrySet()) {
      sum += e.getValue();
    }
    return sum;
  }

  /** Copies in the tier. */
  long count() {
    copies.cleanUp();
    return copies.estimatedSize();
  }

  /** Downloads whose object did not match its digest or size (none kept). */
  int rejected() {
    return rejected.get();
  }

  /**
   * Stops the downloads. Pending deletes are dropped: the next start-up deletes the copies of blobs
   * no longer stored, and evicts down to the size again.
   */
  void close() {
    executor.shutdownNow();
  }
}
