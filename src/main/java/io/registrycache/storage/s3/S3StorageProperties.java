package io.registrycache.storage.s3;

import java.net.URI;
import java.nio.file.Path;
import java.time.Duration;
import org.springframework.boot.context.properties.ConfigurationProperties;
import org.springframework.boot.context.properties.bind.DefaultValue;
import org.springframework.util.unit.DataSize;

/**
 * {@code registry-cache.storage.s3.*}: the S3-API object store of a scaled-out cache (issue 11).
 * Credentials come from the AWS SDK's default provider chain (environment, Java system properties,
 * web identity token for Kubernetes service accounts, profile files, container and instance
 * metadata) unless {@code access-key-id} with {@code secret-access-key} or {@code
 * secret-access-key-file} are given. Secrets never appear in {@link #toString()} or logs.
 *
 * @param endpoint the S3 API endpoint, e.g. {@code http://127.0.0.1:9000}; empty for AWS itself
 * @param region signing region; {@code us-east-1} suits most S3-API servers
 * @param bucket the bucket, which must exist
 * @param prefix key prefix under which the cache keeps its objects, no leading slash
 * @param pathStyle path-style requests ({@code endpoint/bucket/key}), which most S3-API servers
 *     other than AWS need
 * @param partSize multipart upload part size, at least 5 MiB (the S3 minimum for all parts but the
 *     last); 10,000 parts at most, so the default 16 MiB allows blobs up to 156 GiB
 * @param accessKeyId static access key id, with a secret below; empty for the provider chain
 * @param secretAccessKey static secret (prefer {@code secret-access-key-file})
 * @param secretAccessKeyFile file holding the secret (a mounted Kubernetes Secret)
 * @param presignTtl lifetime of presigned URLs handed to clients
 * @param redirect answer a GET of a stored blob with a 307 to a presigned URL of its object instead
 *     of streaming it through the replica; clients must reach {@code endpoint}
 * @param abandonedUploadAge multipart uploads started longer ago than this are taken for those of a
 *     replica killed during a fill and aborted, at start-up and every half of it; must exceed the
 *     longest fill. The backstop: a replica aborts its own unfinished uploads at its restart, and a
 *     blob's next writer aborts a dead writer's upload of it
 * @param indexRefresh how often the in-memory index of blobs is brought up to date with the bucket
 *     (blobs other replicas stored or removed since), by listing it; {@code 0} for only at start-up
 * @param connectTimeout how long opening a connection to the store may take before the request
 *     fails (a black-holed address)
 * @param stallTimeout how long a request's connection may move no byte (below 1 byte/s) before it
 *     is closed and the request fails: a store that accepts connections and never answers cannot
 *     hang a fill, a pull or start-up. Long transfers that keep moving are never cut.
 * @param localTierSize bytes of local disk (under {@code storage.path}) for verified copies of
 *     blobs, served zero-copy instead of from the bucket ({@link S3LocalTier}); {@code 0} (the
 *     default) turns the tier off. Not used with {@code redirect}, where the bytes bypass the
 *     replica.
 * @param accessFlush how often a replica writes the last pulls recorded since its previous write to
 *     the bucket, as one object {@code access/<epoch millis>-<replica id>} (nothing when none
 *     moved), so the evicting replica sees every replica's pulls and they survive restarts; an
 *     evicted blob's object waits at least twice this before its delete (docs/scale-out.md)
 */
@ConfigurationProperties("registry-cache.storage.s3")
public record S3StorageProperties(
    URI endpoint,
    @DefaultValue("us-east-1") String region,
    String bucket,
    @DefaultValue("registry-cache") String prefix,
    @DefaultValue("true") boolean pathStyle,
    @DefaultValue("16MB") DataSize partSize,
    String accessKeyId,
    String secretAccessKey,
    Path secretAccessKeyFile,
    @DefaultValue("5m") Duration presignTtl,
    @DefaultValue("false") boolean redirect,
    @DefaultValue("6h") Duration abandonedUploadAge,
    @DefaultValue("5m") Duration indexRefresh,
    @DefaultValue("5s") Duration connectTimeout,
    @DefaultValue("30s") Duration stallTimeout,
    @DefaultValue("0") DataSize localTierSize,
    @DefaultValue("1m") Duration accessFlush) {

  /** S3's smallest part size for every part of a multipart upload but the last. */
  public static final long MIN_PART_BYTES = 5L * 1024 * 1024;

  public S3StorageProperties {
    if (partSize.toBytes() < MIN_PART_BYTES) {
      throw new IllegalArgumentException(
          "registry-cache.storage.s3.part-size must be at least 5MB: " + partSize);
    }
    if (prefix.startsWith("/")) {
      throw new IllegalArgumentException(
          "registry-cache.storage.s3.prefix must not start with '/': " + prefix);
    }
    if (abandonedUploadAge.isNegative() || abandonedUploadAge.isZero()) {
      throw new IllegalArgumentException(
          "registry-cache.storage.s3.abandoned-upload-age must be positive: " + abandonedUploadAge);
    }
    if (indexRefresh.isNegative()) {
      throw new IllegalArgumentException(
          "registry-cache.storage.s3.index-refresh must not be negative: " + indexRefresh);
    }
    if (connectTimeout.isNegative()
        || connectTimeout.isZero()
        || stallTimeout.isNegative()
        || stallTimeout.isZero()) {
      throw new IllegalArgumentException(
          "registry-cache.storage.s3.connect-timeout and stall-timeout must be positive: "
              + connectTimeout
              + ", "
              + stallTimeout);
    }
    if (accessFlush.isNegative() || accessFlush.isZero()) {
      throw new IllegalArgumentException(
          "registry-cache.storage.s3.access-flush must be positive: " + accessFlush);
    }
    if (localTierSize.isNegative()) {
      throw new IllegalArgumentException(
          "registry-cache.storage.s3.local-tier-size must not be negative: " + localTierSize);
    }
    if (secretAccessKey != null && secretAccessKeyFile != null) {
      throw new IllegalArgumentException(
          "set registry-cache.storage.s3.secret-access-key or secret-access-key-file, not both");
    }
  }

  @Override
  public String toString() {
    return "S3StorageProperties[endpoint="
        + endpoint
        + ", region="
        + region
        + ", bucket="
        + bucket
        + ", prefix="
        + prefix
        + ", pathStyle="
        + pathStyle
        + ", partSize="
        + partSize
        + ", accessKeyId="
        + (accessKeyId == null ? "(provider chain)" : "(set)")
        + ", secretAccessKey="
        + (secretAccessKey == null ? "-" : "(set)")
        + ", secretAccessKeyFile="
        + secretAccessKeyFile
        + ", presignTtl="
        + presignTtl
        + ", redirect="
        + redirect
        + ", abandonedUploadAge="
        + abandonedUploadAge
        + ", indexRefresh="
        + indexRefresh
        + ", connectTimeout="
        + connectTimeout
        + ", stallTimeout="
        + stallTimeout
        + ", localTierSize="
        + localTierSize
        + ", accessFlush="
        + accessFlush
        + "]";
  }
}
