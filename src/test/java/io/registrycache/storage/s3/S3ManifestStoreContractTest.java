package io.registrycache.storage.s3;

import io.registrycache.testsupport.S3Settings;
import io.registrycache.storage.ManifestPersistence;
import io.registrycache.storage.ManifestStoreContract;
import io.registrycache.storage.StorageLayout;
import java.time.Duration;
import org.gaul.s3proxy.auth.AuthenticationType;
import org.gaul.s3proxy.junit.S3ProxyExtension;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.extension.RegisterExtension;
import org.springframework.util.unit.DataSize;
import software.amazon.awssdk.auth.credentials.AwsBasicCredentials;
import software.amazon.awssdk.auth.credentials.StaticCredentialsProvider;
import software.amazon.awssdk.http.crt.AwsCrtAsyncHttpClient;
import software.amazon.awssdk.regions.Region;
import software.amazon.awssdk.services.s3.S3AsyncClient;

/** The {@link ManifestStoreContract} on an S3-API object store: s3proxy in the test JVM, nothing mocked. */
class S3ManifestStoreContractTest extends ManifestStoreContract {

  static final String BUCKET = "registry-cache-manifests";

  @RegisterExtension
  final S3ProxyExtension s3 = S3ProxyExtension.builder()
      .withCredentials(AuthenticationType.AWS_V2_OR_V4, "test-access", "test-secret")
      .build();

  private S3Objects objects;

  @BeforeEach
  void bucket() {
    try (S3AsyncClient admin = S3AsyncClient.builder()
        .httpClientBuilder(AwsCrtAsyncHttpClient.builder())
        .region(Region.US_EAST_1)
        .credentialsProvider(StaticCredentialsProvider.create(AwsBasicCredentials.create(s3.getAccessKey(), s3.getSecretKey())))
        .endpointOverride(s3.getUri())
        .forcePathStyle(true)
        .build()) {
      admin.createBucket(b -> b.bucket(BUCKET)).join();
    }
    objects = S3Objects.create(S3Settings.s3(s3.getUri(), BUCKET, s3.getAccessKey(), s3.getSecretKey()).build());
  }

  @AfterEach
  void closeObjects() {
    objects.close();
  }

  @Override
  protected ManifestPersistence persistence(StorageLayout layout) {
    return new S3ManifestPersistence(objects);
  }
}
