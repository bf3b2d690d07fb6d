package io.registrycache.storage;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.registrycache.oci.Digest;
import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.channels.SeekableByteChannel;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Random;
import java.util.concurrent.Callable;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.stream.Stream;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.springframework.core.io.buffer.DataBufferUtils;
import org.springframework.core.io.buffer.DefaultDataBufferFactory;

/**
 * The behaviour every {@link BlobStore} must have, run against each backend by a subclass: {@link
 * FileBlobStoreContractTest} (a temporary folder) and {@code S3BlobStoreContractTest} (s3proxy in
 * the test JVM). Sizes cross the S3 part size (5 MiB in the tests), so multipart uploads are
 * exercised where the backend has them.
 */
public abstract class BlobStoreContract {

  /** The multipart part size the S3 backend is configured with in these tests. */
  protected static final int PART = 5 * 1024 * 1024;

  protected BlobStore store;

  /**
   * A new store over the backend's (possibly non-empty) storage; the old one, if any, is closed
   * first.
   */
  protected abstract BlobStore openStore() throws Exception;

  /**
   * Whether bytes of {@code digest} are under the blob's final location (file or object key), index
   * aside.
   */
  protected abstract boolean presentAtFinalLocation(Digest digest) throws Exception;

  /**
   * Writes started and neither committed nor aborted at the backend (open multipart uploads); 0
   * where none exist.
   */
  protected abstract long writesInProgress() throws Exception;

  /** The local temporary folder of fills. */
  protected abstract Path tmp();

  @AfterEach
  void closeStore() {
    if (store != null) {
      store.close();
    }
  }

  protected BlobStore store() throws Exception {
    if (store == null) {
      store = openStore();
    }
    return store;
  }

  protected BlobStore reopen() throws Exception {
    store.close();
    store = null;
    return store();
  }

  protected static byte[] random(int size, long seed) {
    byte[] b = new byte[size];
    new Random(seed).nextBytes(b);
    return b;
  }

  /** Appends {@code content} in 1 MiB writes, as a fill does, and commits with its size. */
  protected static long write(ContentWriter w, byte[] content) throws IOException {
    for (int off = 0; off < content.length; off += 1 << 20) {
      w.append(ByteBuffer.wrap(content, off, Math.min(1 << 20, content.length - off)));
    }
    return w.commit(content.length);
  }

  protected static byte[] read(StoredContent content, long start, long count) {
    ByteArrayOutputStream out = new ByteArrayOutputStream();
    content
        .read(start, count, DefaultDataBufferFactory.sharedInstance)
        .doOnNext(
            b -> {
              byte[] chunk = new byte[b.readableByteCount()];
              b.read(chunk);
              out.writeBytes(chunk);
              DataBufferUtils.release(b);
            })
        .blockLast(Duration.ofSeconds(60));
    return out.toByteArray();
  }

  private long tempFilesOf(Digest digest) throws IOException {
    try (Stream<Path> s = Files.list(tmp())) {
      return s.filter(p -> p.getFileName().toString().contains(digest.hex().substring(0, 12)))
          .count();
    }
  }

  @Test
  void absentContentIsAMissEverywhere() throws Exception {
    Digest absent = Digest.sha256(new byte[] {42});
    assertThat(store().lookup(absent)).isEmpty();
    assertThat(store().open(absent)).isEmpty();
    assertThat(store().size(absent)).isEmpty();
    assertThat(store().entry(absent)).isEmpty();
    assertThat(store().evict(absent, Long.MAX_VALUE)).isEqualTo(-1);
    store().touch(absent);
    assertThat(store().count()).isZero();
    assertThat(store().bytes()).isZero();
    assertThat(presentAtFinalLocation(absent)).isFalse();
  }

  @Test
  void aWriterWithALinkLinksTheBlobInItsCommitOnlyOnceVerified() throws Exception {
    for (int size : new int[] {100_000, 2 * PART + 3}) {
      byte[] content = random(size, 50 + size);
      Digest digest = Digest.sha256(content);
      ContentWriter w = store().newWriter(digest, false, "up", "team/app");
      w.append(ByteBuffer.wrap(content));
      assertThat(store().links().servable(digest, "up", "team/app", true))
          .as("not linked before the commit")
          .isFalse();
      assertThat(w.commit(size)).isEqualTo(size);
      assertThat(presentAtFinalLocation(digest)).isTrue();
      assertThat(store().links().servable(digest, "up", "team/app", true)).isTrue();
      assertThat(store().links().servable(digest, "up", "team/other", true))
          .as("linked to the writer's repository only")
          .isFalse();
    }
    byte[] content = random(1_000, 59);
    Digest claimed = Digest.sha256(random(1_000, 60));
    ContentWriter wrong = store().newWriter(claimed, false, "up", "team/app");
    wrong.append(ByteBuffer.wrap(content));
    assertThatThrownBy(() -> wrong.commit(content.length))
        .isInstanceOf(ContentVerificationException.class);
    assertThat(store().links().recheck(claimed, "up", "team/app", true))
        .as("not for bytes that fail verification")
        .isFalse();
  }

  @Test
  void aStoredBlobOpensWholeAndRangedAndSurvivesARestart() throws Exception {
    for (int size : new int[] {0, 1, 100_000, 2 * PART + 12_345}) {
      byte[] content = random(size, size);
      Digest digest = Digest.sha256(content);
      ContentWriter w = store().newWriter(digest);
      assertThat(write(w, content)).isEqualTo(size);
      assertThat(store().lookup(digest)).contains((long) size);
      assertThat(presentAtFinalLocation(digest)).isTrue();
      StoredContent stored = store().open(digest).orElseThrow();
      assertThat(stored.digest()).isEqualTo(digest);
      assertThat(stored.size()).isEqualTo(size);
      assertThat(read(stored, 0, size)).as("whole, %d bytes", size).isEqualTo(content);
      if (size > 70_000) {
        assertThat(read(stored, 70_000, size - 70_000 - 1))
            .isEqualTo(Arrays.copyOfRange(content, 70_000, size - 1));
        assertThat(read(stored, size - 7, 7))
            .isEqualTo(Arrays.copyOfRange(content, size - 7, size));
      }
    }
    assertThat(store().count()).isEqualTo(4);
    assertThat(store().bytes()).isEqualTo(1 + 100_000 + 2L * PART + 12_345);
    assertThat(writesInProgress()).isZero();

    byte[] big = random(2 * PART + 12_345, 2 * PART + 12_345);
    Digest bigDigest = Digest.sha256(big);
    BlobStore restarted = reopen();
    assertThat(restarted.count()).isEqualTo(4);
    assertThat(restarted.bytes()).isEqualTo(1 + 100_000 + 2L * PART + 12_345);
    assertThat(restarted.list()).extracting(BlobIndex.BlobInfo::digest).contains(bigDigest);
    assertThat(read(restarted.open(bigDigest).orElseThrow(), PART - 10, 20))
        .isEqualTo(Arrays.copyOfRange(big, PART - 10, PART + 10));
  }

  @Test
  void aReaderOpenedDuringTheWriteReadsEveryByteAfterTheCommit() throws Exception {
    byte[] content = random(PART + 1_000, 7);
    Digest digest = Digest.sha256(content);
    ContentWriter w = store().newWriter(digest);
    w.append(ByteBuffer.wrap(content, 0, 40_000));
    try (SeekableByteChannel early = w.openReader()) {
      w.append(ByteBuffer.wrap(content, 40_000, content.length - 40_000));
      assertThat(store().size(digest)).as("not visible before the commit").isEmpty();
      assertThat(presentAtFinalLocation(digest)).isFalse();
      w.commit(content.length);
      ByteBuffer all = ByteBuffer.allocate(content.length);
      while (all.hasRemaining() && early.read(all) > 0) {
        // same bytes before and after the commit
      }
      assertThat(all.array()).isEqualTo(content);
    }
    try (SeekableByteChannel late = w.openReader()) {
      assertThat(late.size()).as("a reader joining the finished write").isEqualTo(content.length);
    }
  }

  @Test
  void aDigestOrSizeMismatchLeavesNothingUnderTheFinalKeyAndNoUpload() throws Exception {
    for (int size : new int[] {10_000, 2 * PART + 1}) {
      byte[] content = random(size, 100 + size);
      Digest claimed = Digest.sha256(random(size, 200 + size));
      ContentWriter lying = store().newWriter(claimed);
      assertThatThrownBy(() -> write(lying, content))
          .isInstanceOf(ContentVerificationException.class);
      assertThat(store().size(claimed)).isEmpty();
      assertThat(presentAtFinalLocation(claimed)).isFalse();
      assertThatThrownBy(lying::openReader).isInstanceOf(IOException.class);

      Digest real = Digest.sha256(content);
      ContentWriter shortened = store().newWriter(real);
      for (int off = 0; off < size; off += 1 << 20) {
        shortened.append(ByteBuffer.wrap(content, off, Math.min(1 << 20, size - off)));
      }
      assertThatThrownBy(() -> shortened.commit(size + 1L))
          .isInstanceOf(ContentVerificationException.class);
      assertThat(store().size(real)).isEmpty();
      assertThat(presentAtFinalLocation(real)).isFalse();
      assertThat(writesInProgress()).as("no upload left open, %d bytes", size).isZero();
      assertThat(tempFilesOf(claimed) + tempFilesOf(real)).isZero();
    }
    assertThat(store().count()).isZero();
  }

  @Test
  void anAbortedWriteLeavesNothing() throws Exception {
    byte[] content = random(2 * PART + 3, 9);
    Digest digest = Digest.sha256(content);
    ContentWriter w = store().newWriter(digest);
    w.append(ByteBuffer.wrap(content));
    w.abort();
    w.abort(); // idempotent
    assertThatThrownBy(() -> w.commit(content.length)).isInstanceOf(IOException.class);
    assertThat(store().size(digest)).isEmpty();
    assertThat(presentAtFinalLocation(digest)).isFalse();
    assertThat(writesInProgress()).isZero();
    assertThat(tempFilesOf(digest)).isZero();
  }

  @Test
  void concurrentWritersOfOneDigestStoreItOnce() throws Exception {
    byte[] content = random(PART + 77, 11);
    Digest digest = Digest.sha256(content);
    BlobStore s = store();
    int writers = 3;
    CountDownLatch start = new CountDownLatch(1);
    ExecutorService pool = Executors.newFixedThreadPool(writers);
    try {
      List<Future<Long>> results = new ArrayList<>();
      for (int i = 0; i < writers; i++) {
        ContentWriter w = s.newWriter(digest);
        Callable<Long> job =
            () -> {
              start.await();
              return write(w, content);
            };
        results.add(pool.submit(job));
      }
      start.countDown();
      for (Future<Long> r : results) {
        assertThat(r.get()).isEqualTo(content.length);
      }
    } finally {
      pool.shutdownNow();
    }
    assertThat(s.count()).isEqualTo(1);
    assertThat(s.bytes()).isEqualTo(content.length);
    assertThat(read(s.open(digest).orElseThrow(), 0, content.length)).isEqualTo(content);
    assertThat(writesInProgress()).isZero();
  }

  @Test
  void anEvictedBlobLeavesTheIndexAndItsBytesGo() throws Exception {
    byte[] content = random(50_000, 13);
    Digest digest = Digest.sha256(content);
    write(store().newWriter(digest), content);
    store().links().link(digest, "docker.io", "library/alpine");
    assertThat(store().links().linksOf(digest)).containsExactly("docker.io/library/alpine");

    assertThat(store().evict(digest, Long.MAX_VALUE)).isEqualTo(content.length);
    assertThat(store().open(digest)).isEmpty();
    assertThat(store().links().linksOf(digest)).isEmpty();
    assertThat(store().bytes()).isZero();
    assertThat(presentAtFinalLocation(digest)).as("no delete grace in these tests").isFalse();
    assertThat(reopen().size(digest)).isEmpty();
  }

  @Test
  void linksOfAStoredBlobSurviveARestart() throws Exception {
    byte[] content = random(1_000, 15);
    Digest digest = Digest.sha256(content);
    write(store().newWriter(digest), content);
    store().links().link(digest, "docker.io", "library/alpine");
    // servable from memory, or found by the recheck the pull path makes when it is not
    assertThat(reopen().links().recheck(digest, "docker.io", "library/alpine")).isTrue();
    assertThat(store().links().servable(digest, "docker.io", "library/alpine")).isTrue();
    assertThat(store().links().recheck(digest, "docker.io", "library/busybox")).isFalse();
  }
}
