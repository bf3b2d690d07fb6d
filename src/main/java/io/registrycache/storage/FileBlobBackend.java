package io.registrycache.storage;

import io.registrycache.oci.Digest;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.BasicFileAttributeView;
import java.nio.file.attribute.FileTime;
import java.util.Map;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Blobs as files under {@code <storage.path>/blobs/<algorithm>/<2 hex>/<hex>} ({@link
 * StorageLayout}): the file-system {@link BlobBackend}. A stored blob is read from its file (sent
 * zero-copy); a new one is renamed from its verified temporary file to its content address; the
 * last pull is kept as the file's access time ({@code atime}), read back by {@link #scan}. A file a
 * reader has open may be unlinked at any time: on Linux the reader keeps the inode.
 */
public final class FileBlobBackend implements BlobBackend {

  private static final Logger log = LoggerFactory.getLogger(FileBlobBackend.class);

  private final StorageLayout layout;

  /**
   * @param layout the folders
   */
  public FileBlobBackend(StorageLayout layout) {
    this.layout = layout;
  }

  /** One {@code stat} per file: created = mtime, last pulled = the later of atime and mtime. */
  @Override
  public void scan(Found visitor) {
    layout.scanContent(
        layout.blobsRoot(),
        (digest, attrs) -> {
          long created = attrs.lastModifiedTime().toMillis();
          visitor.found(
              digest, attrs.size(), created, Math.max(created, attrs.lastAccessTime().toMillis()));
        });
  }

  @Override
  public StoredContent open(Digest digest, long size) {
    return new StoredContent.File(digest, layout.blob(digest), size);
  }

  /** Renames the verified temporary file to the blob's content address (one atomic rename). */
  @Override
  public BlobSink sink(Digest digest, boolean behindOwner) {
    return new BlobSink() {
      @Override
      public Path store(Path temp, long size) throws IOException {
        Path stored = layout.blob(digest);
        layout.moveIntoPlace(temp, stored);
        return stored;
      }

      @Override
      public void closed(boolean stored) {}
    };
  }

  @Override
  public void delete(Digest digest) {
    StorageLayout.deleteQuietly(layout.blob(digest));
  }

  @Override
  public LinkPersistence links() {
    return ContentLinks.files(layout, "blobs");
  }

  /**
   * One {@code utimes} per blob: the access time, which {@link #scan} reads back at start-up. A
   * file that cannot be touched (evicted meanwhile) is skipped.
   */
  @Override
  public void recordPulls(Map<Digest, Long> pulls) {
    pulls.forEach(
        (digest, millis) -> {
          try {
            Files.getFileAttributeView(layout.blob(digest), BasicFileAttributeView.class)
                .setTimes(null, FileTime.fromMillis(millis), null);
          } catch (IOException e) {
            log.debug("cannot record the last pull of {}: {}", digest, e.toString());
          }
        });
  }

  @Override
  public boolean recordsPulls() {
    return true;
  }
}
