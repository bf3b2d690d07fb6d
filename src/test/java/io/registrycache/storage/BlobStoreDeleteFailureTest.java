package io.registrycache.storage;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import ch.qos.logback.classic.Level;
import ch.qos.logback.classic.Logger;
import ch.qos.logback.classic.spi.ILoggingEvent;
import ch.qos.logback.core.read.ListAppender;
import io.registrycache.config.ContentScope;
import io.registrycache.config.RegistryCacheProperties;
import io.registrycache.oci.Digest;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.time.Clock;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.slf4j.LoggerFactory;

/**
 * An evicted blob's bytes are deleted later, by a task nothing waits for: when that delete fails,
 * the failure is logged at WARN with the blob's digest, whether the delay ran out or the store's
 * close ran the delete early.
 */
class BlobStoreDeleteFailureTest {

  @TempDir Path root;

  private final Logger logger = (Logger) LoggerFactory.getLogger(BlobStore.class);
  private final ListAppender<ILoggingEvent> appender = new ListAppender<>();
  private BlobStore store;

  @BeforeEach
  void capture() {
    appender.start();
    logger.addAppender(appender);
  }

  @AfterEach
  void release() {
    if (store != null) {
      store.close();
    }
    logger.detachAppender(appender);
  }

  /** A file backend whose deletes fail, as a disk or bucket that refuses them would. */
  private static BlobBackend failingDeletes(StorageLayout layout) {
    FileBlobBackend files = new FileBlobBackend(layout);
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
        throw new IllegalStateException("delete refused");
      }

      @Override
      public LinkPersistence links() {
        return files.links();
      }
    };
  }

  private BlobStore open(Duration deleteGrace) throws IOException {
    StorageLayout layout =
        new StorageLayout(
            RegistryCacheProperties.bind(Map.of("registry-cache.storage.path", root.toString())));
    return new BlobStore(
        failingDeletes(layout), layout, Clock.systemUTC(), deleteGrace, ContentScope.SHARED);
  }

  private static Digest put(BlobStore store) throws IOException {
    byte[] content = "layer".getBytes(StandardCharsets.UTF_8);
    Digest digest = Digest.sha256(content);
    ContentWriter writer = store.newWriter(digest);
    writer.append(ByteBuffer.wrap(content));
    writer.commit(content.length);
    return digest;
  }

  private List<String> warnings() {
    return appender.list.stream()
        .filter(e -> e.getLevel() == Level.WARN)
        .map(ILoggingEvent::getFormattedMessage)
        .toList();
  }

  @Test
  void aDeleteThatFailsAfterItsDelayIsLoggedWithTheDigest() throws IOException {
    store = open(Duration.ofMillis(1));
    Digest digest = put(store);

    assertThat(store.delete(digest)).isTrue();

    await()
        .untilAsserted(
            () ->
                assertThat(warnings())
                    .anySatisfy(
                        m ->
                            assertThat(m)
                                .contains("cannot delete", digest.toString(), "delete refused")));
  }

  @Test
  void aDeleteThatCloseRunsEarlyAndFailsIsLoggedWithTheDigest() throws IOException {
    store = open(Duration.ofHours(1));
    Digest digest = put(store);
    assertThat(store.delete(digest)).isTrue();
    assertThat(warnings()).isEmpty(); // waiting out its grace

    store.close();
    store = null;

    assertThat(warnings())
        .anySatisfy(
            m -> assertThat(m).contains("cannot delete", digest.toString(), "delete refused"));
  }
}
