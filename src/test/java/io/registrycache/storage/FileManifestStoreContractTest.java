package io.registrycache.storage;

/** The {@link ManifestStoreContract} on the file system. */
class FileManifestStoreContractTest extends ManifestStoreContract {

  @Override
  protected ManifestPersistence persistence(StorageLayout layout) {
    return new FileManifestPersistence(layout);
  }
}
