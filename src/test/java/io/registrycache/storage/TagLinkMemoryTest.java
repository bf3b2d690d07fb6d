package io.registrycache.storage;

import static org.assertj.core.api.Assertions.assertThat;

import io.registrycache.oci.Digest;
import io.registrycache.oci.Reference;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.FileTime;
import java.time.Duration;
import java.time.Instant;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * The memory copy of tag links in {@link ManifestStore} ({@link ManifestStore#cachedTag}): filled
 * by reads and writes, kept in step with the disk by every change (put, touch, both deletes).
 */
class TagLinkMemoryTest {

  private static final Reference.Tag TAG = new Reference.Tag("v1");
  private static final Digest A = Digest.sha256("a".getBytes(StandardCharsets.UTF_8));
  private static final Digest B = Digest.sha256("b".getBytes(StandardCharsets.UTF_8));

  @Test
  void aLinkReadFromDiskIsThenInMemoryWithTheFilesTime(@TempDir Path root) throws Exception {
    try (TestCache cache = new TestCache(root, 0, Duration.ZERO)) {
      Path file = cache.layout.tag("up", "library/alpine", "v1");
      Files.createDirectories(file.getParent());
      Files.writeString(file, A + "\n");
      Instant mtime = Instant.parse("2026-01-02T03:04:05Z");
      Files.setLastModifiedTime(file, FileTime.from(mtime));

      assertThat(cache.manifests.cachedTag("up", "library/alpine", TAG)).isEmpty();
      assertThat(cache.manifests.findTag("up", "library/alpine", TAG)).get()
          .extracting(ManifestStore.TagRef::digest).isEqualTo(A);
      ManifestStore.TagRef inMemory = cache.manifests.cachedTag("up", "library/alpine", TAG).orElseThrow();
      assertThat(inMemory.digest()).isEqualTo(A);
      assertThat(inMemory.validatedAt()).isEqualTo(mtime);
    }
  }

  @Test
  void putTouchAndDeleteKeepTheMemoryInStepWithTheDisk(@TempDir Path root) throws Exception {
    try (TestCache cache = new TestCache(root, 0, Duration.ZERO)) {
      ManifestStore store = cache.manifests;
      store.putTag("up", "r", TAG, A);
      assertThat(store.cachedTag("up", "r", TAG).orElseThrow().digest()).isEqualTo(A);
      assertThat(store.cachedTag("other", "r", TAG)).isEmpty();

      store.putTag("up", "r", TAG, B);
      assertThat(store.cachedTag("up", "r", TAG).orElseThrow().digest()).isEqualTo(B);
      assertThat(store.findTag("up", "r", TAG).orElseThrow().digest()).isEqualTo(B);

      Path file = cache.layout.tag("up", "r", "v1");
      Files.setLastModifiedTime(file, FileTime.from(Instant.parse("2020-01-01T00:00:00Z")));
      Instant before = Instant.now().minusSeconds(1);
      store.touchTag("up", "r", TAG);
      Instant touched = store.cachedTag("up", "r", TAG).orElseThrow().validatedAt();
      assertThat(touched).isAfter(before);
      assertThat(Files.getLastModifiedTime(file).toInstant()).isEqualTo(touched);

      store.deleteTag("up", "r", TAG);
      assertThat(store.cachedTag("up", "r", TAG)).isEmpty();
      assertThat(store.findTag("up", "r", TAG)).isEmpty();

      store.putTag("up", "r", TAG, A);
      ManifestStore.TagRef link = store.findTag("up", "r", TAG).orElseThrow();
      assertThat(store.deleteTag(link)).isTrue();
      assertThat(store.cachedTag("up", "r", TAG)).isEmpty();
    }
  }
}
