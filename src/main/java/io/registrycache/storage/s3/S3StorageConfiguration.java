package io.registrycache.storage.s3;

import io.registrycache.config.ConditionalOnStorageType;
import io.registrycache.config.RegistryCacheProperties;
import io.registrycache.config.StorageProperties;
import io.registrycache.storage.StorageLayout;
import java.time.Clock;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Configuration;

/**
 * The object-store backend, chosen once at start-up by {@code registry-cache.storage.type=s3}
 * (default {@code filesystem}: {@link io.registrycache.storage.FileBlobStore}, which is conditional
 * on the same property). The rest of the cache sees only the {@link
 * io.registrycache.storage.BlobStore} and {@link io.registrycache.storage.ManifestPersistence}
 * beans. {@code storage.path} stays in use on the replica: the fills' temporary files and the
 * content links.
 */
@Configuration(proxyBeanMethods = false)
@ConditionalOnStorageType(StorageProperties.Type.S3)
public class S3StorageConfiguration {

  private static final Logger log = LoggerFactory.getLogger(S3StorageConfiguration.class);

  /** The bucket client (closed on shutdown, after the store). */
  @Bean(destroyMethod = "close")
  S3Objects s3Objects(S3StorageProperties properties) {
    log.info("storage type s3: {}", properties); // toString hides the secrets
    return S3Objects.create(properties);
  }

  /**
   * Manifests and tag links in the bucket, under the {@code ManifestStore}'s index and memory
   * cache.
   */
  @Bean
  S3ManifestPersistence s3ManifestPersistence(S3Objects objects, S3LastPulls lastPulls) {
    return new S3ManifestPersistence(objects, lastPulls);
  }

  /**
   * Last pulls of blobs and manifests in the bucket, written every {@code storage.s3.access-flush}.
   */
  @Bean(destroyMethod = "close")
  S3LastPulls s3LastPulls(S3Objects objects, Clock clock, S3StorageProperties properties) {
    return new S3LastPulls(objects, clock, properties.accessFlush());
  }

  /** The blob store: index listed from the bucket at start-up, abandoned uploads aborted. */
  @Bean(destroyMethod = "close")
  S3BlobStore s3BlobStore(
      S3Objects objects,
      StorageLayout layout,
      RegistryCacheProperties cache,
      Clock clock,
      S3StorageProperties properties,
      S3LastPulls lastPulls) {
    return new S3BlobStore(
        objects,
        layout,
        clock,
        cache.storage().deleteGrace(),
        cache.storage().contentScope(),
        properties,
        lastPulls);
  }
}
