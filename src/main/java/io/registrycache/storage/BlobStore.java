package io.registrycache.storage;

import io.registrycache.oci.Digest;
import io.registrycache.oci.OciException;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Map;
import java.util.Optional;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicLong;
import java.util.function.Function;
import java.util.stream.Stream;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import org.springframework.stereotype.Component;

/**
 * Blobs on disk, content-addressed, plus the downloads in flight.
 *
 * <p>A blob is only ever visible under its digest after its bytes were verified against that
 * digest ({@link BlobDownload}). The index of stored blobs (digest → size in bytes) is held in
 * memory, built at start-up from the folder, so a cache hit needs no file-system call before the
 * transfer.
 */
@Component
public class BlobStore {

  private static final Logger log = LoggerFactory.getLogger(BlobStore.class);

  private final StorageLayout layout;
  private final Map<Digest, Long> index = new ConcurrentHashMap<>();
  private final Map<Digest, BlobDownload> inFlight = new ConcurrentHashMap<>();
  private final AtomicLong storedBytes = new AtomicLong();

  public BlobStore(StorageLayout layout) throws IOException {
    this.layout = layout;
    long started = System.nanoTime();
    try (Stream<Path> files = Files.walk(layout.blobsRoot())) {
      files
          .filter(Files::isRegularFile)
          .forEach(
              p -> {
                String algorithm = p.getParent().getParent().getFileName().toString();
                try {
                  Digest digest = Digest.parse(algorithm + ":" + p.getFileName());
                  long size = Files.size(p);
                  index.put(digest, size);
                  storedBytes.addAndGet(size);
                } catch (OciException | IOException e) {
                  log.warn("ignoring unexpected file in blob storage: {}", p);
                }
              });
    }
    log.info(
        "blob index: {} blobs, {} bytes, loaded in {} ms",
        index.size(), storedBytes.get(), (System.nanoTime() - started) / 1_000_000);
  }

  /** Size in bytes of a stored (verified, complete) blob, if it is stored. */
  public Optional<Long> size(Digest digest) {
    return Optional.ofNullable(index.get(digest));
  }

  /** Path of a stored blob; only meaningful when {@link #size} is present. */
  public Path path(Digest digest) {
    return layout.blob(digest);
  }

  /** The download in flight for {@code digest}, if any. */
  public Optional<BlobDownload> inFlight(Digest digest) {
    return Optional.ofNullable(inFlight.get(digest));
  }

  /**
   * Joins the download of {@code digest} in flight, or creates and starts one with {@code
   * starter}: single-flight, so any number of concurrent callers share one upstream transfer.
   */
  public BlobDownload joinOrStart(Digest digest, Function<Digest, BlobDownload> starter) {
    BlobDownload[] created = new BlobDownload[1];
    BlobDownload download =
        inFlight.computeIfAbsent(
            digest,
            d -> {
              created[0] = starter.apply(d);
              return created[0];
            });
    if (download == created[0]) {
      download.start();
    }
    return download;
  }

  /** Called by a download once its verified file is in place. */
  void committed(Digest digest, long size, BlobDownload download) {
    if (index.put(digest, size) == null) {
      storedBytes.addAndGet(size);
    }
    inFlight.remove(digest, download);
  }

  /** Called by a download that failed; nothing was kept. */
  void abandoned(Digest digest, BlobDownload download) {
    inFlight.remove(digest, download);
  }

  /** Removes a stored blob from disk and index (used by pruning and eviction). */
  public boolean delete(Digest digest) throws IOException {
    Long size = index.remove(digest);
    boolean deleted = Files.deleteIfExists(layout.blob(digest));
    if (size != null) {
      storedBytes.addAndGet(-size);
    }
    return deleted;
  }

  StorageLayout layout() {
    return layout;
  }

  /** Number of stored blobs. */
  public int count() {
    return index.size();
  }

  /** Total bytes of stored blobs. */
  public long bytes() {
    return storedBytes.get();
  }

  /** Number of blob downloads in flight. */
  public int inFlightCount() {
    return inFlight.size();
  }
}
