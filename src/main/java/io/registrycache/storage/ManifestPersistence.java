package io.registrycache.storage;

import io.registrycache.oci.Digest;
import io.registrycache.oci.MediaType;
import java.io.IOException;
import java.time.Instant;
import java.util.List;
import java.util.Optional;
import java.util.function.Consumer;

/**
 * Where {@link ManifestStore} keeps manifests and tag links durably: the part of the manifest
 * store that differs between the file system ({@link FileManifestPersistence}, the default) and an
 * S3-API object store ({@code s3.S3ManifestPersistence}, {@code storage.type=s3}). Everything
 * above it — the in-memory index, the Caffeine cache, verification, the pull cascade — is the same
 * code for both. All methods block.
 */
public interface ManifestPersistence {

  /** A stored manifest as found at start-up: size in bytes, times in epoch milliseconds. */
  record Found(Digest digest, long size, long createdMillis, long lastPulledMillis) {}

  /** Visits every stored manifest once (start-up). */
  void scan(Consumer<Found> visitor);

  /** The stored bytes of a manifest, exactly as written; empty when absent. */
  Optional<byte[]> body(Digest digest) throws IOException;

  /** The media type stored with a manifest, as written; empty when absent. */
  Optional<String> mediaType(Digest digest) throws IOException;

  /** Stores verified bytes and their media type under the digest; idempotent. */
  void write(Digest digest, MediaType mediaType, byte[] body) throws IOException;

  /** Removes a manifest's bytes and type; absent is fine. */
  void delete(Digest digest) throws IOException;

  /** Records the last pull time durably when the backend can (best effort; no-op otherwise). */
  void recordPull(Digest digest, long millis);

  /** Every tag link, all upstreams and repositories; unreadable ones skipped. */
  List<TagRef> allTags();

  /** The link of a tag, if any. */
  Optional<TagRef> findTag(String upstreamKey, String name, String tag);

  /** Points a tag at a digest, confirmed by the upstream at {@code validatedAt}. */
  void putTag(String upstreamKey, String name, String tag, Digest digest, Instant validatedAt);

  /** Records that the upstream confirmed an existing tag link at {@code validatedAt}; no-op when absent. */
  void touchTag(String upstreamKey, String name, String tag, Instant validatedAt);

  /** Removes a tag link; absent is fine. */
  void deleteTag(String upstreamKey, String name, String tag);

  /** The tags of one repository, in lexical order. */
  List<String> tags(String upstreamKey, String name);

  /** Where the content links of manifests are kept: beside the manifests. */
  LinkPersistence links();
}
