package io.registrycache.storage;

import io.registrycache.config.RegistryCacheProperties;
import io.registrycache.oci.Digest;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Map;
import org.junit.jupiter.api.io.TempDir;

/**
 * The {@link BlobStoreContract} on the file system: {@link FileBlobStore} over a temporary folder.
 */
class FileBlobStoreContractTest extends BlobStoreContract {

  @TempDir Path root;
  private StorageLayout layout;

  @Override
  protected BlobStore openStore() throws Exception {
    RegistryCacheProperties properties =
        RegistryCacheProperties.bind(Map.of("registry-cache.storage.path", root.toString()));
    layout = new StorageLayout(properties);
    return new FileBlobStore(layout);
  }

  @Override
  protected boolean presentAtFinalLocation(Digest digest) {
    return Files.exists(layout.blob(digest));
  }

  @Override
  protected long writesInProgress() {
    return 0; // a file store has no server-side writes: the temporary files are checked apart
  }

  @Override
  protected Path tmp() {
    return layout.tmpRoot();
  }
}
