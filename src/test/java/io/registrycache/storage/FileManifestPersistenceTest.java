package io.registrycache.storage;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.registrycache.config.RegistryCacheProperties;
import io.registrycache.oci.Digest;
import io.registrycache.oci.MediaType;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Instant;
import java.util.Map;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;

/**
 * Reads of manifests and tag links on disk: a miss is empty, a hit exact, a broken file an error.
 */
class FileManifestPersistenceTest {

  @TempDir Path root;

  private FileManifestPersistence persistence() throws IOException {
    return new FileManifestPersistence(
        new StorageLayout(
            RegistryCacheProperties.bind(Map.of("registry-cache.storage.path", root.toString()))));
  }

  @Test
  void aMissingTagIsEmptyAndAStoredOneReadsBackWithItsValidationTime() throws IOException {
    FileManifestPersistence p = persistence();
    assertThat(p.tags().find("local", "team/app", "v1")).isEmpty();
    Digest digest = Digest.sha256("m".getBytes(StandardCharsets.UTF_8));
    Instant validated = Instant.parse("2026-01-02T03:04:05.123Z");
    p.tags().put("local", "team/app", "v1", digest, validated);
    TagRef ref = p.tags().find("local", "team/app", "v1").orElseThrow();
    assertThat(ref.digest()).isEqualTo(digest);
    assertThat(ref.validatedAt()).isEqualTo(validated);
    assertThat(p.tags().find("local", "team/app", "v2")).isEmpty();
    assertThat(p.tags().find("local", "team/other", "v1")).isEmpty();
    p.tags().delete("local", "team/app", "v1");
    assertThat(p.tags().find("local", "team/app", "v1")).isEmpty();
  }

  @Test
  void aTagLinkThatExistsButCannotBeReadIsAnErrorNotAMiss() throws IOException {
    FileManifestPersistence p = persistence();
    Files.createDirectories(
        root.resolve("tags/local/team/app/_tags/v1")); // a folder where the file belongs
    assertThatThrownBy(() -> p.tags().find("local", "team/app", "v1"))
        .isInstanceOf(UncheckedIOException.class);
  }

  @Test
  void aMissingManifestIsEmptyAndAStoredOneReadsBackWithItsType() throws IOException {
    FileManifestPersistence p = persistence();
    byte[] body = "{\"schemaVersion\":2}".getBytes(StandardCharsets.UTF_8);
    Digest digest = Digest.sha256(body);
    assertThat(p.read(digest)).isEmpty();
    p.write(digest, MediaType.parse("application/vnd.oci.image.manifest.v1+json"), body);
    ManifestPersistence.Stored stored = p.read(digest).orElseThrow();
    assertThat(stored.body()).isEqualTo(body);
    assertThat(stored.mediaType()).isEqualTo("application/vnd.oci.image.manifest.v1+json");
    p.delete(digest);
    assertThat(p.read(digest)).isEmpty();
  }

  /**
   * A manifest whose body names its own media type is one file; one whose upstream type differs
   * from the body's (or whose body names none) keeps a {@code .type} file, which wins on reading,
   * as it does for manifests stored before.
   */
  @ParameterizedTest
  @CsvSource(
      delimiter = '|',
      value = {
        "{\"schemaVersion\":2,\"config\":{\"mediaType\":\"x/config\"},\"mediaType\":\"application/vnd.oci.image.index.v1+json\"}|application/vnd.oci.image.index.v1+json|false",
        "{\"schemaVersion\":2,\"mediaType\":\"application/vnd.oci.image.manifest.v1+json\"}|application/vnd.docker.distribution.manifest.v2+json|true",
        "{\"schemaVersion\":2,\"config\":{\"mediaType\":\"application/vnd.oci.image.manifest.v1+json\"}}|application/vnd.oci.image.manifest.v1+json|true",
        "not json|application/vnd.oci.image.manifest.v1+json|true"
      })
  void theMediaTypeHasAFileOfItsOwnOnlyWhenTheBodyDoesNotNameIt(
      String json, String type, boolean typeFile) throws IOException {
    FileManifestPersistence p = persistence();
    byte[] body = json.getBytes(StandardCharsets.UTF_8);
    Digest digest = Digest.sha256(body);
    p.write(digest, MediaType.parse(type), body);
    StorageLayout layout =
        new StorageLayout(
            RegistryCacheProperties.bind(Map.of("registry-cache.storage.path", root.toString())));
    assertThat(Files.exists(layout.manifestType(digest))).as(".type file").isEqualTo(typeFile);
    assertThat(p.read(digest).orElseThrow().mediaType()).isEqualTo(type);
    assertThat(p.read(digest).orElseThrow().body()).isEqualTo(body);
  }
}
