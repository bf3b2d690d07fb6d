package io.registrycache.storage.s3;

import io.registrycache.storage.ManifestPersistence;
import io.registrycache.storage.ManifestStoreContract;
import io.registrycache.storage.StorageLayout;
import io.registrycache.testsupport.S3TestServer;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.extension.RegisterExtension;

/**
 * The {@link ManifestStoreContract} on an S3-API object store: s3proxy in the test JVM, nothing
 * mocked.
 */
class S3ManifestStoreContractTest extends ManifestStoreContract {

  static final String BUCKET = "registry-cache-manifests";

  @RegisterExtension final S3TestServer s3 = S3TestServer.eachTest(BUCKET);

  private S3Objects objects;

  @BeforeEach
  void openObjects() {
    objects = S3Objects.create(s3.settings().build());
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
