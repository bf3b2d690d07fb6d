package io.registrycache.storage;

import io.registrycache.config.ConditionalOnStorageType;
import io.registrycache.config.ContentScope;
import io.registrycache.config.RegistryCacheProperties;
import io.registrycache.config.StorageProperties;
import io.registrycache.oci.Digest;
import java.nio.file.Path;
import java.time.Clock;
import java.time.Duration;
import org.springframework.beans.factory.annotation.Autowired;
import org.springframework.stereotype.Component;

/**
 * The {@link BlobStore} over the file system ({@link FileBlobBackend}): the store when {@code
 * registry-cache.storage.type} is {@code filesystem} or unset; {@code s3} selects {@code
 * s3.S3BlobStore} instead. Only constructors: everything else is {@link BlobStore}'s.
 */
@Component
@ConditionalOnStorageType(StorageProperties.Type.FILESYSTEM)
public class FileBlobStore extends BlobStore {

  private final StorageLayout layout;

  /** A store with the system clock and no delete grace (tests). */
  public FileBlobStore(StorageLayout layout) {
    this(layout, Clock.systemUTC(), Duration.ZERO);
  }

  @Autowired
  public FileBlobStore(StorageLayout layout, RegistryCacheProperties properties, Clock clock) {
    this(layout, clock, properties.storage().deleteGrace(), properties.storage().contentScope());
  }

  /** A store serving content in the default scope ({@code repository}). */
  public FileBlobStore(StorageLayout layout, Clock clock, Duration deleteGrace) {
    this(layout, clock, deleteGrace, RegistryCacheProperties.defaults().storage().contentScope());
  }

  /**
   * @param layout the folders
   * @param clock source of access times
   * @param deleteGrace how long an evicted blob's file stays on disk after leaving the index
   * @param scope where a stored blob may be served ({@link ContentLinks})
   */
  public FileBlobStore(
      StorageLayout layout, Clock clock, Duration deleteGrace, ContentScope scope) {
    super(new FileBlobBackend(layout), layout, clock, deleteGrace, scope);
    this.layout = layout;
  }

  /** Path of a stored blob; only meaningful when {@link #size} is present. */
  public Path path(Digest digest) {
    return layout.blob(digest);
  }

  StorageLayout layout() {
    return layout;
  }
}
