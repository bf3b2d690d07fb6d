package io.registrycache.storage;

import io.registrycache.oci.Digest;
import io.registrycache.oci.Json;
import io.registrycache.oci.MediaType;
import java.io.IOException;
import java.util.Optional;
import java.util.function.Consumer;
import tools.jackson.core.JacksonException;
import tools.jackson.core.JsonParser;
import tools.jackson.core.JsonToken;

/**
 * Where {@link ManifestStore} keeps manifests durably: the part of the manifest store that differs
 * between the file system ({@link FileManifestPersistence}, the default) and an S3-API object store
 * ({@code s3.S3ManifestPersistence}, {@code storage.type=s3}), in the shape of a blob backend's
 * ({@link BlobBackend}): scan, read, write, delete, links; tag links beside them ({@link #tags}).
 * Everything above it — the in-memory index, the Caffeine cache, verification, the pull cascade —
 * is the same code for both. All methods block.
 */
public interface ManifestPersistence {

  /** A stored manifest as found at start-up: size in bytes, times in epoch milliseconds. */
  record Found(Digest digest, long size, long createdMillis, long lastPulledMillis) {}

  /** A stored manifest's bytes, exactly as written, and the media type stored with them. */
  @SuppressWarnings("ArrayRecordComponent") // a carrier of bytes, never compared or hashed
  record Stored(String mediaType, byte[] body) {}

  /** Visits every stored manifest once (start-up). */
  void scan(Consumer<Found> visitor);

  /** The stored manifest {@code digest}; empty when absent. */
  Optional<Stored> read(Digest digest) throws IOException;

  /** Stores verified bytes and their media type under the digest; idempotent. */
  void write(Digest digest, MediaType mediaType, byte[] body) throws IOException;

  /** Removes a manifest's bytes and type; absent is fine. */
  void delete(Digest digest) throws IOException;

  /** Where the content links of manifests are kept: beside the manifests. */
  LinkPersistence links();

  /** Where tag links are kept: beside the manifests. */
  TagPersistence tags();

  /** Records the last pull time durably when the backend can (best effort; no-op by default). */
  default void recordPull(Digest digest, long millis) {}

  /** The top-level {@code mediaType} string of a JSON manifest, or "" (none, or not JSON). */
  static String mediaTypeField(byte[] body) {
    try (JsonParser parser = Json.MAPPER.createParser(body)) {
      if (parser.nextToken() != JsonToken.START_OBJECT) {
        return "";
      }
      for (JsonToken t = parser.nextToken(); t == JsonToken.PROPERTY_NAME; t = parser.nextToken()) {
        String name = parser.currentName();
        JsonToken value = parser.nextToken();
        if ("mediaType".equals(name)) {
          return value == JsonToken.VALUE_STRING ? parser.getString() : "";
        }
        parser.skipChildren();
      }
      return "";
    } catch (JacksonException e) {
      return "";
    }
  }
}
