package io.registrycache.storage;

import io.registrycache.config.ConditionalOnStorageType;
import io.registrycache.config.StorageProperties;
import io.registrycache.oci.Digest;
import io.registrycache.oci.MediaType;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.NoSuchFileException;
import java.nio.file.Path;
import java.nio.file.attribute.BasicFileAttributeView;
import java.nio.file.attribute.FileTime;
import java.util.Optional;
import java.util.function.Consumer;
import org.springframework.stereotype.Component;

/**
 * Manifests on the file system under {@code storage.path}: {@code
 * manifests/<algorithm>/<xx>/<hex>}, with a {@code .type} file beside it when the media type is not
 * the body's own {@code mediaType}; the last pull is the file's access time; tag links beside them
 * ({@link FileTagPersistence}). Every write is atomic (temporary file, rename).
 */
@Component
@ConditionalOnStorageType(StorageProperties.Type.FILESYSTEM)
public final class FileManifestPersistence implements ManifestPersistence {

  private final StorageLayout layout;
  private final FileTagPersistence tags;

  public FileManifestPersistence(StorageLayout layout) {
    this.layout = layout;
    this.tags = new FileTagPersistence(layout);
  }

  @Override
  public LinkPersistence links() {
    return ContentLinks.files(layout, "manifests");
  }

  @Override
  public void scan(Consumer<Found> visitor) {
    layout.scanContent(
        layout.manifestsRoot(),
        (digest, attrs) -> {
          long created = attrs.lastModifiedTime().toMillis();
          long pulled = Math.max(created, attrs.lastAccessTime().toMillis());
          visitor.accept(new Found(digest, attrs.size(), created, pulled));
        });
  }

  /**
   * The manifest and its media type: its {@code .type} file where it has one, else the body's own
   * {@code mediaType}. A missing manifest (every cold pull by digest) is found by {@link
   * Files#exists}, without the exception opening a missing file throws; one deleted between that
   * check and the read is a miss as well.
   */
  @Override
  public Optional<Stored> read(Digest digest) throws IOException {
    Path p = layout.manifest(digest);
    if (!Files.exists(p)) {
      return Optional.empty();
    }
    try {
      byte[] body = Files.readAllBytes(p);
      Path typeFile = layout.manifestType(digest);
      String type =
          Files.exists(typeFile)
              ? Files.readString(typeFile, StandardCharsets.UTF_8).trim()
              : ManifestPersistence.mediaTypeField(body);
      return Optional.of(new Stored(type, body));
    } catch (NoSuchFileException e) {
      return Optional.empty(); // deleted since the check
    }
  }

  /**
   * Writes the manifest, and a {@code .type} file only when its media type is not the body's own
   * {@code mediaType} (OCI Image Spec: manifests and indexes should carry it; Docker's schema 2
   * must): one file and one rename per manifest instead of two.
   */
  @Override
  public void write(Digest digest, MediaType mediaType, byte[] body) {
    Path target = layout.manifest(digest);
    if (!Files.exists(target)) {
      String type = mediaType.toString();
      if (!type.equals(ManifestPersistence.mediaTypeField(body))) {
        layout.writeAtomically(
            layout.manifestType(digest), (type + "\n").getBytes(StandardCharsets.UTF_8));
      }
      layout.writeAtomically(target, body);
    }
  }

  @Override
  public void delete(Digest digest) throws IOException {
    Files.deleteIfExists(layout.manifest(digest));
    Files.deleteIfExists(layout.manifestType(digest));
  }

  /** Sets the file's access time, read back at start-up. */
  @Override
  public void recordPull(Digest digest, long millis) {
    try {
      Files.getFileAttributeView(layout.manifest(digest), BasicFileAttributeView.class)
          .setTimes(null, FileTime.fromMillis(millis), null);
    } catch (IOException ignored) {
      // only the eviction order after a restart depends on it
    }
  }

  @Override
  public TagPersistence tags() {
    return tags;
  }
}
