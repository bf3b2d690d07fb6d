package io.registrycache.proxy;

import static org.assertj.core.api.Assertions.assertThat;

import io.registrycache.config.RegistryCacheProperties;
import io.registrycache.oci.Digest;
import io.registrycache.storage.BlobStore;
import io.registrycache.storage.BlobWriter;
import io.registrycache.storage.FileBlobStore;
import io.registrycache.storage.StorageLayout;
import io.registrycache.upstream.UpstreamBlob;
import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.Random;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.stream.Stream;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.springframework.core.io.buffer.DataBuffer;
import org.springframework.core.io.buffer.DataBufferUtils;
import org.springframework.core.io.buffer.DefaultDataBufferFactory;
import reactor.core.publisher.Flux;
import reactor.core.publisher.Mono;
import reactor.core.publisher.Sinks;
import reactor.core.scheduler.Scheduler;
import reactor.core.scheduler.Schedulers;

/** The download shared by concurrent readers: streaming, verification, nothing kept on failure. */
class BlobDownloadTest {

  /** Downloads that are not resumed: a source here sends the same body whatever the offset. */
  private static final io.registrycache.config.BlobsProperties NO_RESUME =
      io.registrycache.config.BlobsProperties.of(Duration.ofMinutes(1), 0);

  @TempDir Path root;
  private FileBlobStore store;
  private final SingleFlight<Digest, BlobDownload> downloads = new SingleFlight<>();
  private Scheduler scheduler;

  @BeforeEach
  void setUp() throws IOException {
    RegistryCacheProperties props =
        RegistryCacheProperties.bind(java.util.Map.of("registry-cache.storage.path", root.toString()));
    store = new FileBlobStore(new StorageLayout(props));
    scheduler = Schedulers.newBoundedElastic(4, 1000, "test-storage");
  }

  @AfterEach
  void tearDown() {
    scheduler.dispose();
  }

  private static byte[] random(int size) {
    byte[] b = new byte[size];
    new Random(size).nextBytes(b);
    return b;
  }

  private static Flux<DataBuffer> chunks(byte[] content, int chunk) {
    return Flux.range(0, (content.length + chunk - 1) / chunk)
        .map(i -> DefaultDataBufferFactory.sharedInstance.wrap(
            java.util.Arrays.copyOfRange(content, i * chunk, Math.min(content.length, (i + 1) * chunk))));
  }

  private static byte[] collect(Flux<DataBuffer> body) {
    ByteArrayOutputStream out = new ByteArrayOutputStream();
    body.doOnNext(b -> {
          byte[] bytes = new byte[b.readableByteCount()];
          b.read(bytes);
          out.writeBytes(bytes);
          DataBufferUtils.release(b);
        })
        .blockLast(Duration.ofSeconds(20));
    return out.toByteArray();
  }

  private BlobDownload start(Digest digest, Mono<UpstreamBlob> source, AtomicInteger upstreamCalls) {
    return downloads.join(
        digest,
        d -> {
          return new BlobDownload(d, "test@" + d, () -> store.newWriter(d), (offset, ownerGaveUp) -> {
            upstreamCalls.incrementAndGet();
            return source;
          }, scheduler, NO_RESUME);
        },
        download -> {
          // As the pull-through service does: the download leaves the single-flight when it ends.
          download.completion().doFinally(s -> downloads.finished(digest, download)).subscribe(null, e -> {});
          download.start();
        });
  }

  private long tmpFiles() throws IOException {
    try (Stream<Path> s = Files.list(root.resolve("tmp"))) {
      return s.count();
    }
  }

  @Test
  void readersJoiningAtAnyTimeGetTheWholeBlobAndItIsStoredOnce() throws IOException {
    byte[] content = random(3 * 1024 * 1024 + 17);
    Digest digest = Digest.sha256(content);
    Sinks.Many<DataBuffer> upstream = Sinks.many().unicast().onBackpressureBuffer();
    AtomicInteger calls = new AtomicInteger();
    BlobDownload first = start(digest, Mono.just(new UpstreamBlob(content.length, upstream.asFlux())), calls);
    Mono<byte[]> early = Mono.fromCallable(() -> collect(first.read(0, -1))).subscribeOn(Schedulers.boundedElastic());
    var earlyResult = early.toFuture();
    // Half the bytes arrive, then a second reader joins the same download.
    int half = content.length / 2;
    chunks(java.util.Arrays.copyOf(content, half), 64 * 1024).subscribe(upstream::tryEmitNext);
    BlobDownload joined = start(digest, Mono.error(new AssertionError("second upstream call")), calls);
    assertThat(joined).isSameAs(first);
    var lateResult = Mono.fromCallable(() -> collect(joined.read(0, -1))).subscribeOn(Schedulers.boundedElastic()).toFuture();
    chunks(java.util.Arrays.copyOfRange(content, half, content.length), 64 * 1024).subscribe(upstream::tryEmitNext);
    upstream.tryEmitComplete();

    assertThat(earlyResult.join()).isEqualTo(content);
    assertThat(lateResult.join()).isEqualTo(content);
    assertThat(calls).hasValue(1);
    // Readers end once the bytes are verified; the store's commit (fsync, rename) may still run.
    assertThat(first.completion().block(Duration.ofSeconds(20))).isEqualTo(content.length);
    assertThat(store.size(digest)).contains((long) content.length);
    assertThat(Files.readAllBytes(store.path(digest))).isEqualTo(content);
    assertThat(tmpFiles()).isZero();
    assertThat(downloads.size()).isZero();
  }

  /** A real {@link BlobWriter} into {@code root/tmp} whose store step is {@code storing}. */
  private java.util.concurrent.Callable<BlobStore.Writer> writerWith(Digest d, BlobWriter.Sink storing) {
    return () -> new BlobWriter(d, root.resolve("tmp").resolve(d.hex() + ".part"), storing);
  }

  @Test
  void readersGetTheLastByteOnceVerifiedWithoutWaitingForTheStoreToCommit() throws Exception {
    byte[] content = random(700_000);
    Digest digest = Digest.sha256(content);
    java.util.concurrent.CountDownLatch storing = new java.util.concurrent.CountDownLatch(1);
    java.util.concurrent.CountDownLatch release = new java.util.concurrent.CountDownLatch(1);
    var slow = writerWith(digest, new BlobWriter.Sink() {
      @Override
      public Path store(Path temp, long size) throws IOException {
        storing.countDown();
        try {
          release.await(); // an fsync of a large file, or an object-store upload
        } catch (InterruptedException e) {
          throw new IOException(e);
        }
        return temp;
      }

      @Override
      public void closed(boolean stored) {}
    });
    BlobDownload d = new BlobDownload(digest, "test@" + digest, slow,
        (offset, ownerGaveUp) -> Mono.just(new UpstreamBlob(content.length, chunks(content, 64 * 1024))),
        scheduler, NO_RESUME);
    d.start();
    assertThat(collect(d.read(0, -1))).isEqualTo(content);
    // The reader ended while the store step is still blocked (it cannot finish before release).
    assertThat(storing.await(20, java.util.concurrent.TimeUnit.SECONDS)).isTrue();
    var completion = d.completion().toFuture();
    assertThat(completion).isNotDone();
    release.countDown();
    assertThat(completion.get(20, java.util.concurrent.TimeUnit.SECONDS)).isEqualTo(content.length);
  }

  @Test
  void aStoreThatFailsAfterTheCheckKeepsNothingAndFailsTheCompletion() throws IOException {
    byte[] content = random(300_000);
    Digest digest = Digest.sha256(content);
    var failing = writerWith(digest, new BlobWriter.Sink() {
      @Override
      public Path store(Path temp, long size) throws IOException {
        throw new IOException("No space left on device");
      }

      @Override
      public void closed(boolean stored) {}
    });
    BlobDownload d = new BlobDownload(digest, "test@" + digest, failing,
        (offset, ownerGaveUp) -> Mono.just(new UpstreamBlob(content.length, chunks(content, 64 * 1024))),
        scheduler, NO_RESUME);
    d.start();
    Throwable error = d.completion().then(Mono.<Throwable>empty()).onErrorResume(Mono::just).block(Duration.ofSeconds(20));
    assertThat(error).hasMessageContaining("cannot store");
    assertThat(tmpFiles()).isZero();
  }

  @Test
  void rangeOfAGrowingDownload() {
    byte[] content = random(1_000_000);
    Digest digest = Digest.sha256(content);
    BlobDownload d = start(digest, Mono.just(new UpstreamBlob(content.length, chunks(content, 10_000)
        .delayElements(Duration.ofMillis(1)))), new AtomicInteger());
    assertThat(collect(d.read(500, 1499))).isEqualTo(java.util.Arrays.copyOfRange(content, 500, 1500));
  }

  @Test
  void bytesThatDoNotMatchTheDigestAreNeitherServedCleanNorKept() throws IOException {
    byte[] content = random(200_000);
    Digest claimed = Digest.sha256(random(10));
    BlobDownload d = start(claimed, Mono.just(new UpstreamBlob(content.length, chunks(content, 8192))), new AtomicInteger());
    AtomicInteger received = new AtomicInteger();
    Throwable error = d.read(0, -1)
        .doOnNext(b -> {
          received.addAndGet(b.readableByteCount());
          DataBufferUtils.release(b);
        })
        .then(Mono.<Throwable>empty())
        .onErrorResume(Mono::just)
        .block(Duration.ofSeconds(20));
    assertThat(error).isNotNull();
    assertThat(received.get()).isLessThan(content.length);
    assertThat(store.size(claimed)).isEmpty();
    assertThat(Files.exists(store.path(claimed))).isFalse();
    assertThat(tmpFiles()).isZero();
  }

  @Test
  void anUpstreamThatDiesMidTransferLeavesNothing() throws IOException {
    byte[] content = random(300_000);
    Digest digest = Digest.sha256(content);
    Flux<DataBuffer> dying = chunks(java.util.Arrays.copyOf(content, 100_000), 8192)
        .concatWith(Flux.error(new IOException("connection reset by upstream")));
    BlobDownload d = start(digest, Mono.just(new UpstreamBlob(content.length, dying)), new AtomicInteger());
    Throwable error = d.read(0, -1).doOnNext(DataBufferUtils::release).then(Mono.<Throwable>empty())
        .onErrorResume(Mono::just).block(Duration.ofSeconds(20));
    assertThat(error).isNotNull();
    assertThat(store.size(digest)).isEmpty();
    assertThat(tmpFiles()).isZero();
    // The next request starts afresh.
    AtomicInteger calls = new AtomicInteger();
    BlobDownload retry = start(digest, Mono.just(new UpstreamBlob(content.length, chunks(content, 8192))), calls);
    assertThat(collect(retry.read(0, -1))).isEqualTo(content);
    assertThat(calls).hasValue(1);
  }

  /** An upstream body of {@code content} in chunks, counting the bytes it has sent. */
  private static Flux<DataBuffer> counted(byte[] content, int chunk, java.util.concurrent.atomic.AtomicLong sent) {
    return chunks(content, chunk).doOnNext(b -> sent.addAndGet(b.readableByteCount()));
  }

  /** A reader that takes one buffer now and then, by hand. */
  private static final class SlowReader extends reactor.core.publisher.BaseSubscriber<DataBuffer> {
    final ByteArrayOutputStream bytes = new ByteArrayOutputStream();
    final java.util.concurrent.CompletableFuture<byte[]> done = new java.util.concurrent.CompletableFuture<>();

    @Override
    protected void hookOnSubscribe(org.reactivestreams.Subscription s) {
      s.request(1);
    }

    @Override
    protected synchronized void hookOnNext(DataBuffer b) {
      byte[] chunk = new byte[b.readableByteCount()];
      b.read(chunk);
      bytes.writeBytes(chunk);
      DataBufferUtils.release(b);
    }

    synchronized int received() {
      return bytes.size();
    }

    @Override
    protected void hookOnComplete() {
      done.complete(bytes.toByteArray());
    }

    @Override
    protected void hookOnError(Throwable e) {
      done.completeExceptionally(e);
    }
  }

  @Test
  void aSlowReaderStallsNeitherTheFillNorAFastReaderAndCatchesUpFromTheFile() throws Exception {
    byte[] content = random(12 * 1024 * 1024 + 5);
    Digest digest = Digest.sha256(content);
    Sinks.Many<DataBuffer> upstream = Sinks.many().unicast().onBackpressureBuffer();
    BlobDownload d = start(digest, Mono.just(new UpstreamBlob(content.length, upstream.asFlux())), new AtomicInteger());
    SlowReader slow = new SlowReader();
    d.read(0, -1).subscribe(slow);
    var fast = Mono.fromCallable(() -> collect(d.read(0, -1))).subscribeOn(Schedulers.boundedElastic()).toFuture();
    long most = 0;
    for (int i = 0; i < content.length; i += 64 * 1024) {
      byte[] part = java.util.Arrays.copyOfRange(content, i, Math.min(content.length, i + 64 * 1024));
      upstream.tryEmitNext(DefaultDataBufferFactory.sharedInstance.wrap(part));
      most = Math.max(most, d.bufferedBytes());
    }
    upstream.tryEmitComplete();

    assertThat(fast.get(20, java.util.concurrent.TimeUnit.SECONDS)).isEqualTo(content);
    assertThat(d.completion().block(Duration.ofSeconds(20))).isEqualTo(content.length);
    assertThat(slow.received()).isLessThan(content.length / 2); // it asked for one buffer only
    // What the download held for its readers stayed bounded although one reader took nothing.
    assertThat(most).isLessThanOrEqualTo(
        BlobDownload.MAX_UNWRITTEN_BYTES + 2L * BlobDownload.READER_QUEUE_BYTES + 2 * 64 * 1024);
    slow.request(Long.MAX_VALUE); // the rest comes from the stored file
    assertThat(slow.done.get(20, java.util.concurrent.TimeUnit.SECONDS)).isEqualTo(content);
  }

  @Test
  void theFillGoesAtThePaceOfItsFastestReader() throws Exception {
    byte[] content = random(32 * 1024 * 1024);
    Digest digest = Digest.sha256(content);
    java.util.concurrent.atomic.AtomicLong sent = new java.util.concurrent.atomic.AtomicLong();
    BlobDownload d = new BlobDownload(digest, "test@" + digest, () -> store.newWriter(digest),
        (offset, ownerGaveUp) -> Mono.just(new UpstreamBlob(content.length, counted(content, 64 * 1024, sent))),
        scheduler, NO_RESUME);
    SlowReader reader = new SlowReader();
    d.read(0, -1).subscribe(reader); // the first client is there from the first byte on
    d.start();
    // The reader takes 2 MiB, one buffer at a time; the upstream is read only a bounded way ahead.
    long ahead = 0;
    while (reader.received() < 2 * 1024 * 1024) {
      reader.request(1);
      Thread.onSpinWait();
      ahead = Math.max(ahead, sent.get() - reader.received());
    }
    assertThat(ahead).isLessThanOrEqualTo(BlobDownload.PACE_BYTES + 16L * 64 * 1024);
    assertThat(sent.get()).isLessThan(content.length / 4);
    reader.request(Long.MAX_VALUE);
    assertThat(reader.done.get(20, java.util.concurrent.TimeUnit.SECONDS)).isEqualTo(content);
  }

  @Test
  void aTransferThatBreaksOffIsResumedFromTheNextByteAndReadersSeeNoBreak() throws Exception {
    byte[] content = random(2 * 1024 * 1024 + 3);
    Digest digest = Digest.sha256(content);
    int cut1 = content.length * 3 / 10;
    int cut2 = content.length * 6 / 10;
    java.util.List<Long> offsets = new java.util.concurrent.CopyOnWriteArrayList<>();
    BlobDownload.Source source = (offset, ownerGaveUp) -> {
      offsets.add(offset);
      int from = (int) offset;
      int to = from < cut1 ? cut1 : from < cut2 ? cut2 : content.length;
      Flux<DataBuffer> body = chunks(java.util.Arrays.copyOfRange(content, from, to), 64 * 1024);
      if (to < content.length) {
        body = body.concatWith(Flux.error(new IOException("connection reset by upstream")));
      }
      return Mono.just(new UpstreamBlob(content.length, body));
    };
    BlobDownload d = new BlobDownload(digest, "test@" + digest, () -> store.newWriter(digest), source, scheduler,
        io.registrycache.config.BlobsProperties.of(Duration.ofMinutes(1), 3));
    d.start();
    assertThat(collect(d.read(0, -1))).isEqualTo(content);
    assertThat(d.completion().block(Duration.ofSeconds(20))).isEqualTo(content.length);
    assertThat(offsets).containsExactly(0L, (long) cut1, (long) cut2);
    assertThat(Files.readAllBytes(store.path(digest))).isEqualTo(content);
  }

  @Test
  void resumesAreBoundedThenTheDownloadFailsAndKeepsNothing() throws IOException {
    byte[] content = random(500_000);
    Digest digest = Digest.sha256(content);
    AtomicInteger opened = new AtomicInteger();
    BlobDownload.Source alwaysBreaks = (offset, ownerGaveUp) -> {
      opened.incrementAndGet();
      int from = (int) offset;
      return Mono.just(new UpstreamBlob(content.length,
          chunks(java.util.Arrays.copyOfRange(content, from, from + 1000), 500)
              .concatWith(Flux.error(new IOException("connection reset by upstream")))));
    };
    BlobDownload d = new BlobDownload(digest, "test@" + digest, () -> store.newWriter(digest), alwaysBreaks, scheduler,
        io.registrycache.config.BlobsProperties.of(Duration.ofMinutes(1), 2));
    d.start();
    Throwable error = d.completion().then(Mono.<Throwable>empty()).onErrorResume(Mono::just).block(Duration.ofSeconds(20));
    assertThat(error).hasMessageContaining("connection reset");
    assertThat(opened).hasValue(3); // the request and two resumes
    assertThat(store.size(digest)).isEmpty();
    assertThat(tmpFiles()).isZero();
  }
}
