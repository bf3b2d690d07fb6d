package io.registrycache.storage;

import io.registrycache.oci.Digest;
import io.registrycache.oci.Json;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.AtomicMoveNotSupportedException;
import java.nio.file.Files;
import java.nio.file.NoSuchFileException;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.time.Instant;
import java.util.Optional;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import org.springframework.stereotype.Component;
import tools.jackson.core.JacksonException;
import tools.jackson.databind.JsonNode;
import tools.jackson.databind.json.JsonMapper;
import tools.jackson.databind.node.ObjectNode;

/**
 * Referrers lists as an upstream's referrers API gave them, one small JSON file per upstream,
 * repository and subject digest under {@code referrers/} of the storage root (the file name is the
 * sha256 of {@code <upstream>|<repository>|<digest>}, so no name reaches the file system). Files
 * are written to {@code tmp/} and moved in place: a reader never sees half a file. The referrer
 * manifests themselves are ordinary stored manifests; these lists are only their index. Blocking:
 * call on the storage scheduler.
 */
@Component
public class ReferrersStore {

  private static final Logger log = LoggerFactory.getLogger(ReferrersStore.class);
  private static final JsonMapper JSON = Json.MAPPER;

  private final Path root;
  private final Path tmp;

  public ReferrersStore(StorageLayout layout) throws IOException {
    this.root = layout.root().resolve("referrers");
    this.tmp = layout.tmpRoot();
    Files.createDirectories(root);
  }

  /**
   * A stored list.
   *
   * @param fromApi whether the upstream had the referrers API ({@code false}: it answered 404 and
   *     the referrers tag schema is used)
   * @param manifests the descriptors (a JSON array), as the upstream listed them
   * @param fetchedAt when the upstream last gave this answer
   */
  public record Entry(boolean fromApi, JsonNode manifests, Instant fetchedAt) {}

  /** The stored list, if any; an unreadable file counts as none. */
  public Optional<Entry> find(String upstreamKey, String repository, Digest subject) {
    Path file = file(upstreamKey, repository, subject);
    try {
      JsonNode node = JSON.readTree(Files.readAllBytes(file));
      return Optional.of(
          new Entry(
              node.path("api").asBoolean(),
              node.path("manifests"),
              Instant.ofEpochMilli(node.path("fetchedAt").asLong())));
    } catch (NoSuchFileException e) {
      return Optional.empty();
    } catch (IOException | JacksonException e) {
      log.warn("ignoring unreadable referrers list {}: {}", file, e.getMessage());
      return Optional.empty();
    }
  }

  /** Stores (replaces) a list. */
  public void put(String upstreamKey, String repository, Digest subject, Entry entry) {
    ObjectNode node = JSON.createObjectNode();
    node.put("api", entry.fromApi());
    node.put("fetchedAt", entry.fetchedAt().toEpochMilli());
    node.set("manifests", entry.manifests());
    Path file = file(upstreamKey, repository, subject);
    try {
      Path part = Files.createTempFile(tmp, "referrers-", ".part");
      Files.write(part, JSON.writeValueAsBytes(node));
      try {
        Files.move(part, file, StandardCopyOption.ATOMIC_MOVE, StandardCopyOption.REPLACE_EXISTING);
      } catch (AtomicMoveNotSupportedException e) {
        Files.move(part, file, StandardCopyOption.REPLACE_EXISTING);
      }
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
  }

  private Path file(String upstreamKey, String repository, Digest subject) {
    String key = upstreamKey + "|" + repository + "|" + subject;
    return root.resolve(Digest.sha256(key.getBytes(StandardCharsets.UTF_8)).hex() + ".json");
  }
}
