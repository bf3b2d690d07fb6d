package io.registrycache.testsupport;

import io.registrycache.storage.s3.S3StorageProperties;
import java.net.URI;
import java.nio.file.Path;
import java.time.Duration;
import org.springframework.util.unit.DataSize;

/**
 * Builds {@link S3StorageProperties} for tests by name instead of sixteen positional arguments.
 * Defaults: region {@code us-east-1}, prefix {@code cache}, path-style, 5 MB parts, presigned URLs
 * for 1 minute, no redirect, uploads abandoned after 6 h, no index refresh, connect timeout 5 s,
 * stall timeout 30 s, no local tier.
 */
public final class S3Settings {

  private URI endpoint;
  private String region = "us-east-1";
  private String bucket;
  private String prefix = "cache";
  private boolean pathStyle = true;
  private DataSize partSize = DataSize.ofMegabytes(5);
  private String accessKeyId;
  private String secretAccessKey;
  private Path secretAccessKeyFile;
  private Duration presignTtl = Duration.ofMinutes(1);
  private boolean redirect;
  private Duration abandonedUploadAge = Duration.ofHours(6);
  private Duration indexRefresh = Duration.ZERO;
  private Duration connectTimeout = Duration.ofSeconds(5);
  private Duration stallTimeout = Duration.ofSeconds(30);
  private DataSize localTierSize = DataSize.ofBytes(0);
  private Duration accessFlush = Duration.ofMinutes(1);

  private S3Settings() {}

  /** A store at {@code endpoint} (may be null), bucket {@code bucket}, with these credentials. */
  public static S3Settings s3(
      URI endpoint, String bucket, String accessKeyId, String secretAccessKey) {
    S3Settings s = new S3Settings();
    s.endpoint = endpoint;
    s.bucket = bucket;
    s.accessKeyId = accessKeyId;
    s.secretAccessKey = secretAccessKey;
    return s;
  }

  /** Every setting of {@code p}, to change a few. */
  public static S3Settings from(S3StorageProperties p) {
    S3Settings s = s3(p.endpoint(), p.bucket(), p.accessKeyId(), p.secretAccessKey());
    s.region = p.region();
    s.prefix = p.prefix();
    s.pathStyle = p.pathStyle();
    s.partSize = p.partSize();
    s.secretAccessKeyFile = p.secretAccessKeyFile();
    s.presignTtl = p.presignTtl();
    s.redirect = p.redirect();
    s.abandonedUploadAge = p.abandonedUploadAge();
    s.indexRefresh = p.indexRefresh();
    s.connectTimeout = p.connectTimeout();
    s.stallTimeout = p.stallTimeout();
    s.localTierSize = p.localTierSize();
    s.accessFlush = p.accessFlush();
    return s;
  }

  public S3Settings partSize(DataSize size) {
    this.partSize = size;
    return this;
  }

  public S3Settings abandonedUploadAge(Duration age) {
    this.abandonedUploadAge = age;
    return this;
  }

  public S3Settings presignTtl(Duration ttl) {
    this.presignTtl = ttl;
    return this;
  }

  public S3Settings connectTimeout(Duration timeout) {
    this.connectTimeout = timeout;
    return this;
  }

  public S3Settings stallTimeout(Duration timeout) {
    this.stallTimeout = timeout;
    return this;
  }

  public S3Settings localTierSize(DataSize size) {
    this.localTierSize = size;
    return this;
  }

  public S3Settings accessFlush(Duration every) {
    this.accessFlush = every;
    return this;
  }

  /**
   * @throws IllegalArgumentException as {@link S3StorageProperties} does for a bad value
   */
  public S3StorageProperties build() {
    return new S3StorageProperties(
        endpoint,
        region,
        bucket,
        prefix,
        pathStyle,
        partSize,
        accessKeyId,
        secretAccessKey,
        secretAccessKeyFile,
        presignTtl,
        redirect,
        abandonedUploadAge,
        indexRefresh,
        connectTimeout,
        stallTimeout,
        localTierSize,
        accessFlush);
  }
}
