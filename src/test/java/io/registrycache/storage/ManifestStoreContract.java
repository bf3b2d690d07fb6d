package io.registrycache.storage;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.registrycache.config.RegistryCacheProperties;
import io.registrycache.oci.Digest;
import io.registrycache.oci.MediaType;
import io.registrycache.oci.Reference;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.time.Clock;
import java.time.Instant;
import java.util.Map;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * The behaviour of {@link ManifestStore} on each {@link ManifestPersistence}, run by a subclass:
 * {@link FileManifestStoreContractTest} (a temporary folder) and {@code
 * S3ManifestStoreContractTest} (s3proxy in the test JVM): manifests by digest, verified, across a
 * restart; tag links with the time the upstream confirmed them.
 */
public abstract class ManifestStoreContract {

  static final MediaType OCI_MANIFEST =
      MediaType.parse("application/vnd.oci.image.manifest.v1+json");

  @TempDir protected Path root;
  private FileBlobStore blobs;

  /** The persistence under test, over the backend's (possibly non-empty) storage. */
  protected abstract ManifestPersistence persistence(StorageLayout layout) throws Exception;

  protected ManifestStore open() throws Exception {
    RegistryCacheProperties properties =
        RegistryCacheProperties.bind(Map.of("registry-cache.storage.path", root.toString()));
    StorageLayout layout = new StorageLayout(properties);
    if (blobs != null) {
      blobs.close();
    }
    blobs = new FileBlobStore(layout);
    return new ManifestStore(persistence(layout), blobs, properties, Clock.systemUTC());
  }

  @AfterEach
  void closeBlobs() {
    if (blobs != null) {
      blobs.close();
    }
  }

  static StoredManifest manifest(String text) {
    byte[] body = text.getBytes(StandardCharsets.UTF_8);
    return new StoredManifest(Digest.sha256(body), OCI_MANIFEST, body);
  }

  @Test
  void aManifestIsStoredByDigestVerifiedAndFoundAfterARestart() throws Exception {
    ManifestStore store = open();
    StoredManifest m = manifest("{\"schemaVersion\":2,\"layers\":[],\"x\":\"\\u00e9\"}");
    assertThat(store.find(m.digest())).isEmpty();
    store.put(m);
    assertThat(store.find(m.digest()))
        .hasValueSatisfying(f -> assertThat(f.body()).isEqualTo(m.body()));
    assertThat(store.count()).isEqualTo(1);
    assertThat(store.bytes()).isEqualTo(m.body().length);

    ManifestStore restarted = open();
    assertThat(restarted.count()).isEqualTo(1);
    assertThat(restarted.cached(m.digest())).as("not in memory after a restart").isEmpty();
    assertThat(restarted.find(m.digest()))
        .hasValueSatisfying(
            f -> {
              assertThat(f.body()).isEqualTo(m.body());
              assertThat(f.mediaType()).isEqualTo(OCI_MANIFEST);
            });
    assertThat(restarted.content(m.digest())).isPresent();

    restarted.delete(m.digest());
    assertThat(restarted.find(m.digest())).isEmpty();
    assertThat(open().count()).isZero();
  }

  @Test
  void linksOfAStoredManifestSurviveARestartAndGoWithIt() throws Exception {
    ManifestStore store = open();
    StoredManifest m = manifest("{\"schemaVersion\":2,\"linked\":true}");
    store.put(m);
    store.links().link(m.digest(), "docker.io", "library/alpine");
    ManifestStore restarted = open();
    // servable from memory, or found by the recheck the pull path makes when it is not
    assertThat(restarted.links().recheck(m.digest(), "docker.io", "library/alpine")).isTrue();
    assertThat(restarted.links().servable(m.digest(), "docker.io", "library/alpine")).isTrue();
    assertThat(restarted.links().recheck(m.digest(), "docker.io", "library/busybox")).isFalse();
    restarted.delete(m.digest());
    assertThat(open().links().linksOf(m.digest())).isEmpty();
    assertThat(open().links().recheck(m.digest(), "docker.io", "library/alpine"))
        .as("the links went with it")
        .isFalse();
  }

  @Test
  void bytesThatDoNotMatchTheDigestAreNotStored() throws Exception {
    ManifestStore store = open();
    StoredManifest real = manifest("{\"schemaVersion\":2}");
    Digest other = Digest.sha256("something else".getBytes(StandardCharsets.UTF_8));
    assertThatThrownBy(() -> store.put(new StoredManifest(other, OCI_MANIFEST, real.body())))
        .isInstanceOf(ContentVerificationException.class);
    assertThat(store.find(other)).isEmpty();
    assertThat(open().count()).isZero();
  }

  @Test
  void tagLinksKeepTheirDigestAndConfirmationTime() throws Exception {
    ManifestStore store = open();
    Digest a = manifest("{\"a\":1}").digest();
    Digest b = manifest("{\"b\":1}").digest();
    Reference.Tag latest = new Reference.Tag("latest");
    assertThat(store.findTag("docker.io", "library/alpine", latest)).isEmpty();

    // Whole seconds: file times have a 1 s resolution on some file systems.
    Instant confirmed = Instant.ofEpochSecond(1_800_000_000L);
    store.putTag("docker.io", "library/alpine", latest, a, confirmed);
    store.putTag("docker.io", "library/alpine", new Reference.Tag("3.20"), a, confirmed);
    store.putTag("docker.io", "library/alpine/sub", new Reference.Tag("v1"), b, confirmed);
    store.putTag("ghcr.io", "library/alpine", latest, b, confirmed);

    TagRef ref = store.findTag("docker.io", "library/alpine", latest).orElseThrow();
    assertThat(ref.digest()).isEqualTo(a);
    assertThat(ref.validatedAt()).isEqualTo(confirmed);
    assertThat(open().findTag("docker.io", "library/alpine", latest).orElseThrow().validatedAt())
        .as("kept durably")
        .isEqualTo(confirmed);
    assertThat(store.tags("docker.io", "library/alpine")).containsExactly("3.20", "latest");
    assertThat(open().allTags())
        .extracting(TagRef::image)
        .containsExactlyInAnyOrder(
            "docker.io/library/alpine:latest", "docker.io/library/alpine:3.20",
            "docker.io/library/alpine/sub:v1", "ghcr.io/library/alpine:latest");

    Instant again = confirmed.plusSeconds(300);
    store.touchTag("docker.io", "library/alpine", latest, again);
    assertThat(store.findTag("docker.io", "library/alpine", latest).orElseThrow().validatedAt())
        .isEqualTo(again);
    assertThat(open().findTag("docker.io", "library/alpine", latest).orElseThrow().validatedAt())
        .isEqualTo(again);

    store.putTag("docker.io", "library/alpine", latest, b, again);
    assertThat(store.deleteTag(ref)).as("moved meanwhile: kept").isFalse();
    assertThat(store.deleteTag(store.findTag("docker.io", "library/alpine", latest).orElseThrow()))
        .isTrue();
    store.deleteTag("docker.io", "library/alpine", new Reference.Tag("3.20"));
    assertThat(store.tags("docker.io", "library/alpine")).isEmpty();
    assertThat(store.findTag("docker.io", "library/alpine/sub", new Reference.Tag("v1")))
        .isPresent();
  }
}
