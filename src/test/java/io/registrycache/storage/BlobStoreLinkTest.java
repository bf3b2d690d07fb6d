package io.registrycache.storage;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.registrycache.config.ContentScope;
import io.registrycache.config.RegistryCacheProperties;
import io.registrycache.oci.Digest;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Clock;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.function.BiConsumer;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * A writer made with a repository to link ({@link BlobStore#newWriter(Digest, boolean, String,
 * String)}) links the blob inside its commit, once verified and before the blob becomes visible: a
 * replica on a shared store that finds the blob finds its link too. The order is the store's own
 * (the same for every backend), so a file backend whose links note what was visible pins it.
 */
class BlobStoreLinkTest {

  @TempDir Path root;

  private StorageLayout layout;
  private BlobStore store;

  /** Per link made: whether the blob was visible then (at its final location or indexed). */
  private final List<Boolean> visibleAtLink = new ArrayList<>();

  private boolean failLinks;

  @BeforeEach
  void open() throws IOException {
    layout =
        new StorageLayout(
            RegistryCacheProperties.bind(Map.of("registry-cache.storage.path", root.toString())));
    store =
        new BlobStore(
            observedLinks(new FileBlobBackend(layout)),
            layout,
            Clock.systemUTC(),
            Duration.ZERO,
            ContentScope.REPOSITORY);
  }

  @AfterEach
  void close() {
    store.close();
  }

  /** {@code files}, its links noting whether their blob was visible when made. */
  private BlobBackend observedLinks(FileBlobBackend files) {
    LinkPersistence links = files.links();
    return new BlobBackend() {
      @Override
      public void scan(Found visitor) {
        files.scan(visitor);
      }

      @Override
      public StoredContent open(Digest digest, long size) {
        return files.open(digest, size);
      }

      @Override
      public BlobSink sink(Digest digest, boolean behindOwner) throws IOException {
        return files.sink(digest, behindOwner);
      }

      @Override
      public void delete(Digest digest) {
        files.delete(digest);
      }

      @Override
      public LinkPersistence links() {
        return new LinkPersistence() {
          @Override
          public void scan(BiConsumer<Digest, String> visitor) {
            links.scan(visitor);
          }

          @Override
          public void create(Digest digest, String upstreamSegment, String repository)
              throws IOException {
            visibleAtLink.add(Files.exists(layout.blob(digest)) || store.size(digest).isPresent());
            if (failLinks) {
              throw new IOException("link refused");
            }
            links.create(digest, upstreamSegment, repository);
          }

          @Override
          public void removeAll(Digest digest) {
            links.removeAll(digest);
          }
        };
      }
    };
  }

  @Test
  void theBlobIsLinkedOnceVerifiedAndBeforeItBecomesVisible() throws IOException {
    byte[] content = "layer".getBytes(StandardCharsets.UTF_8);
    Digest digest = Digest.sha256(content);
    ContentWriter writer = store.newWriter(digest, false, "up", "team/app");
    writer.append(ByteBuffer.wrap(content));
    assertThat(visibleAtLink).as("nothing linked before the commit").isEmpty();

    assertThat(writer.commit(content.length)).isEqualTo(content.length);

    assertThat(visibleAtLink).as("linked once, while not yet visible").containsExactly(false);
    assertThat(Files.exists(layout.blob(digest))).isTrue();
    assertThat(store.links().servable(digest, "up", "team/app")).isTrue();
    assertThat(store.links().servable(digest, "up", "team/other")).isFalse();
  }

  @Test
  void bytesThatFailVerificationAreNeitherLinkedNorStored() throws IOException {
    byte[] content = "layer".getBytes(StandardCharsets.UTF_8);
    Digest claimed = Digest.sha256("another layer".getBytes(StandardCharsets.UTF_8));
    ContentWriter writer = store.newWriter(claimed, false, "up", "team/app");
    writer.append(ByteBuffer.wrap(content));

    assertThatThrownBy(() -> writer.commit(content.length))
        .isInstanceOf(ContentVerificationException.class);

    assertThat(visibleAtLink).isEmpty();
    assertThat(store.size(claimed)).isEmpty();
  }

  @Test
  void aLinkThatCannotBeMadeDoesNotFailTheCommit() throws IOException {
    failLinks = true;
    byte[] content = "layer".getBytes(StandardCharsets.UTF_8);
    Digest digest = Digest.sha256(content);
    ContentWriter writer = store.newWriter(digest, false, "up", "team/app");
    writer.append(ByteBuffer.wrap(content));

    assertThat(writer.commit(content.length)).isEqualTo(content.length);

    assertThat(visibleAtLink).containsExactly(false);
    assertThat(store.size(digest)).contains((long) content.length);
    assertThat(store.links().servable(digest, "up", "team/app")).isFalse();
  }

  @Test
  void aWriterWithoutARepositoryLinksNothing() throws IOException {
    byte[] content = "layer".getBytes(StandardCharsets.UTF_8);
    Digest digest = Digest.sha256(content);
    ContentWriter writer = store.newWriter(digest);
    writer.append(ByteBuffer.wrap(content));

    writer.commit(content.length);

    assertThat(visibleAtLink).isEmpty();
    assertThat(store.size(digest)).contains((long) content.length);
  }
}
