package io.registrycache.proxy;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.fail;
import static org.awaitility.Awaitility.await;

import io.netty.buffer.ByteBuf;
import io.netty.buffer.Unpooled;
import io.netty.buffer.UnpooledByteBufAllocator;
import io.registrycache.config.RegistryCacheProperties;
import io.registrycache.oci.Digest;
import io.registrycache.storage.BlobSink;
import io.registrycache.storage.BlobWriter;
import io.registrycache.storage.ContentWriter;
import io.registrycache.storage.FileBlobStore;
import io.registrycache.storage.StorageLayout;
import io.registrycache.upstream.UpstreamBlob;
import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.channels.SeekableByteChannel;
import java.nio.file.Files;
import java.nio.file.Path;
import java.security.MessageDigest;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HexFormat;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.concurrent.Callable;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.Executor;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.ThreadLocalRandom;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.locks.LockSupport;
import java.util.stream.Stream;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;
import org.junit.jupiter.params.provider.ValueSource;
import org.reactivestreams.Subscription;
import org.springframework.core.io.buffer.DataBuffer;
import org.springframework.core.io.buffer.DataBufferFactory;
import org.springframework.core.io.buffer.DataBufferUtils;
import org.springframework.core.io.buffer.DefaultDataBufferFactory;
import org.springframework.core.io.buffer.NettyDataBufferFactory;
import org.springframework.util.unit.DataSize;
import reactor.core.Disposable;
import reactor.core.publisher.BaseSubscriber;
import reactor.core.publisher.Flux;
import reactor.core.publisher.Mono;
import reactor.core.publisher.Sinks;
import reactor.core.scheduler.Scheduler;
import reactor.core.scheduler.Schedulers;
import reactor.test.StepVerifier;

/** The download shared by concurrent readers: streaming, verification, nothing kept on failure. */
class BlobDownloadTest {

  /** Downloads that are not resumed: a source here sends the same body whatever the offset. */
  /** {@code blobs.orphan-download-timeout} of every download here. */
  private static final Duration ORPHAN = Duration.ofMinutes(1);

  /** A store step that keeps the verified file where it was written. */
  private static final BlobSink KEEP_IN_PLACE =
      new BlobSink() {
        @Override
        public Path store(Path temp, long size) {
          return temp;
        }

        @Override
        public void closed(boolean stored) {}
      };

  @TempDir Path root;
  private FileBlobStore store;
  private final SingleFlight<Digest, BlobDownload> downloads = new SingleFlight<>();
  private Scheduler scheduler;

  /** The direct buffers readers send from, as the service has them (16 MiB). */
  private ReaderBuffers buffers = new ReaderBuffers(DataSize.ofMegabytes(16));

  /**
   * Where {@link FileReads} runs readers' file reads: not on threads a held store step may block.
   */
  private Scheduler readScheduler;

  @BeforeEach
  void setUp() throws IOException {
    RegistryCacheProperties props =
        RegistryCacheProperties.bind(Map.of("registry-cache.storage.path", root.toString()));
    store = new FileBlobStore(new StorageLayout(props));
    scheduler = Schedulers.newBoundedElastic(4, 1000, "test-storage");
    readScheduler = Schedulers.newBoundedElastic(4, 1000, "test-reads");
  }

  @AfterEach
  void tearDown() {
    scheduler.dispose();
    readScheduler.dispose();
  }

  private static byte[] random(int size) {
    byte[] b = new byte[size];
    new Random(size).nextBytes(b);
    return b;
  }

  private static Flux<DataBuffer> chunks(byte[] content, int chunk) {
    return Flux.range(0, (content.length + chunk - 1) / chunk)
        .map(
            i ->
                DefaultDataBufferFactory.sharedInstance.wrap(
                    Arrays.copyOfRange(
                        content, i * chunk, Math.min(content.length, (i + 1) * chunk))));
  }

  private static byte[] collect(Flux<DataBuffer> body) {
    ByteArrayOutputStream out = new ByteArrayOutputStream();
    body.doOnNext(
            b -> {
              byte[] bytes = new byte[b.readableByteCount()];
              b.read(bytes);
              out.writeBytes(bytes);
              DataBufferUtils.release(b);
            })
        .blockLast(Duration.ofSeconds(20));
    return out.toByteArray();
  }

  private BlobDownload start(
      Digest digest, Mono<UpstreamBlob> source, AtomicInteger upstreamCalls) {
    return downloads.join(
        digest,
        d -> {
          return new BlobDownload(
              d,
              "test@" + d,
              () -> store.newWriter(d),
              (offset, ownerGaveUp) -> {
                upstreamCalls.incrementAndGet();
                return source;
              },
              scheduler,
              buffers,
              ORPHAN,
              0);
        },
        download -> {
          // As the pull-through service does: the download leaves the single-flight when it ends.
          download
              .completion()
              .doFinally(s -> downloads.finished(digest, download))
              .subscribe(null, e -> {});
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
    BlobDownload first =
        start(digest, Mono.just(new UpstreamBlob(content.length, upstream.asFlux())), calls);
    Mono<byte[]> early =
        Mono.fromCallable(() -> collect(first.read(0, -1)))
            .subscribeOn(Schedulers.boundedElastic());
    var earlyResult = early.toFuture();
    // Half the bytes arrive, then a second reader joins the same download.
    int half = content.length / 2;
    chunks(Arrays.copyOf(content, half), 64 * 1024).subscribe(upstream::tryEmitNext);
    BlobDownload joined =
        start(digest, Mono.error(new AssertionError("second upstream call")), calls);
    assertThat(joined).isSameAs(first);
    var lateResult =
        Mono.fromCallable(() -> collect(joined.read(0, -1)))
            .subscribeOn(Schedulers.boundedElastic())
            .toFuture();
    chunks(Arrays.copyOfRange(content, half, content.length), 64 * 1024)
        .subscribe(upstream::tryEmitNext);
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
  private Callable<ContentWriter> writerWith(Digest d, BlobSink storing) {
    return () -> new BlobWriter(d, root.resolve("tmp").resolve(d.hex() + ".part"), storing);
  }

  @Test
  void readersGetTheLastByteOnceVerifiedWithoutWaitingForTheStoreToCommit() throws Exception {
    byte[] content = random(700_000);
    Digest digest = Digest.sha256(content);
    CountDownLatch storing = new CountDownLatch(1);
    CountDownLatch release = new CountDownLatch(1);
    var slow =
        writerWith(
            digest,
            new BlobSink() {
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
    BlobDownload d =
        new BlobDownload(
            digest,
            "test@" + digest,
            slow,
            (offset, ownerGaveUp) ->
                Mono.just(new UpstreamBlob(content.length, chunks(content, 64 * 1024))),
            scheduler,
            buffers,
            ORPHAN,
            0);
    d.start();
    ByteArrayOutputStream out = new ByteArrayOutputStream();
    CompletableFuture<Void> ended = new CompletableFuture<>();
    Disposable reading =
        d.read(0, -1)
            .subscribe(
                b -> {
                  byte[] bytes = new byte[b.readableByteCount()];
                  b.read(bytes);
                  out.writeBytes(bytes);
                  DataBufferUtils.release(b);
                },
                ended::completeExceptionally,
                () -> ended.complete(null));
    try {
      ended.get(20, TimeUnit.SECONDS);
    } catch (TimeoutException timedOut) { // say what the reader was doing before it is cancelled
      String state = dump(d);
      reading.dispose();
      release.countDown();
      throw new AssertionError(
          "the reader did not end within 20 s (" + out.size() + " bytes read)\n  " + state,
          timedOut);
    }
    byte[] read = out.toByteArray();
    assertThat(read).isEqualTo(content);
    // The reader ended while the store step is still blocked (it cannot finish before release).
    assertThat(storing.await(20, TimeUnit.SECONDS)).isTrue();
    var completion = d.completion().toFuture();
    assertThat(completion).isNotDone();
    release.countDown();
    assertThat(completion.get(20, TimeUnit.SECONDS)).isEqualTo(content.length);
  }

  @Test
  void aStoreThatFailsAfterTheCheckKeepsNothingAndFailsTheCompletion() throws IOException {
    byte[] content = random(300_000);
    Digest digest = Digest.sha256(content);
    var failing =
        writerWith(
            digest,
            new BlobSink() {
              @Override
              public Path store(Path temp, long size) throws IOException {
                throw new IOException("No space left on device");
              }

              @Override
              public void closed(boolean stored) {}
            });
    BlobDownload d =
        new BlobDownload(
            digest,
            "test@" + digest,
            failing,
            (offset, ownerGaveUp) ->
                Mono.just(new UpstreamBlob(content.length, chunks(content, 64 * 1024))),
            scheduler,
            buffers,
            ORPHAN,
            0);
    d.start();
    Throwable error =
        d.completion()
            .then(Mono.<Throwable>empty())
            .onErrorResume(Mono::just)
            .block(Duration.ofSeconds(20));
    assertThat(error).hasMessageContaining("cannot store");
    assertThat(tmpFiles()).isZero();
  }

  @Test
  void rangeOfAGrowingDownload() {
    byte[] content = random(1_000_000);
    Digest digest = Digest.sha256(content);
    BlobDownload d =
        start(
            digest,
            Mono.just(
                new UpstreamBlob(
                    content.length, chunks(content, 10_000).delayElements(Duration.ofMillis(1)))),
            new AtomicInteger());
    assertThat(collect(d.read(500, 1499))).isEqualTo(Arrays.copyOfRange(content, 500, 1500));
  }

  @Test
  void bytesThatDoNotMatchTheDigestAreNeitherServedCleanNorKept() throws IOException {
    byte[] content = random(200_000);
    Digest claimed = Digest.sha256(random(10));
    BlobDownload d =
        start(
            claimed,
            Mono.just(new UpstreamBlob(content.length, chunks(content, 8192))),
            new AtomicInteger());
    AtomicInteger received = new AtomicInteger();
    Throwable error =
        d.read(0, -1)
            .doOnNext(
                b -> {
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
    Flux<DataBuffer> dying =
        chunks(Arrays.copyOf(content, 100_000), 8192)
            .concatWith(Flux.error(new IOException("connection reset by upstream")));
    BlobDownload d =
        start(digest, Mono.just(new UpstreamBlob(content.length, dying)), new AtomicInteger());
    Throwable error =
        d.read(0, -1)
            .doOnNext(DataBufferUtils::release)
            .then(Mono.<Throwable>empty())
            .onErrorResume(Mono::just)
            .block(Duration.ofSeconds(20));
    assertThat(error).isNotNull();
    assertThat(store.size(digest)).isEmpty();
    assertThat(tmpFiles()).isZero();
    // The next request starts afresh.
    AtomicInteger calls = new AtomicInteger();
    BlobDownload retry =
        start(digest, Mono.just(new UpstreamBlob(content.length, chunks(content, 8192))), calls);
    assertThat(collect(retry.read(0, -1))).isEqualTo(content);
    assertThat(calls).hasValue(1);
  }

  /** An upstream body of {@code content} in chunks, counting the bytes it has sent. */
  private static Flux<DataBuffer> counted(byte[] content, int chunk, AtomicLong sent) {
    return chunks(content, chunk).doOnNext(b -> sent.addAndGet(b.readableByteCount()));
  }

  /** A reader that takes one buffer now and then, by hand. */
  private static final class SlowReader extends BaseSubscriber<DataBuffer> {
    final ByteArrayOutputStream bytes = new ByteArrayOutputStream();
    final CompletableFuture<byte[]> done = new CompletableFuture<>();

    @Override
    protected void hookOnSubscribe(Subscription s) {
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
    BlobDownload d =
        start(
            digest,
            Mono.just(new UpstreamBlob(content.length, upstream.asFlux())),
            new AtomicInteger());
    SlowReader slow = new SlowReader();
    d.read(0, -1).subscribe(slow);
    var fast =
        Mono.fromCallable(() -> collect(d.read(0, -1)))
            .subscribeOn(Schedulers.boundedElastic())
            .toFuture();
    long most = 0;
    for (int i = 0; i < content.length; i += 64 * 1024) {
      byte[] part = Arrays.copyOfRange(content, i, Math.min(content.length, i + 64 * 1024));
      upstream.tryEmitNext(DefaultDataBufferFactory.sharedInstance.wrap(part));
      most = Math.max(most, d.bufferedBytes());
    }
    upstream.tryEmitComplete();

    assertThat(fast.get(20, TimeUnit.SECONDS)).isEqualTo(content);
    assertThat(d.completion().block(Duration.ofSeconds(20))).isEqualTo(content.length);
    assertThat(slow.received()).isLessThan(content.length / 2); // it asked for one buffer only
    // What the download held for its readers stayed bounded although one reader took nothing.
    assertThat(most).isLessThanOrEqualTo(BlobDownload.MAX_UNWRITTEN_BYTES + 2 * 64 * 1024);
    slow.request(Long.MAX_VALUE); // the rest comes from the stored file
    assertThat(slow.done.get(20, TimeUnit.SECONDS)).isEqualTo(content);
  }

  @Test
  void theFillGoesAtThePaceOfItsFastestReader() throws Exception {
    byte[] content = random(32 * 1024 * 1024);
    Digest digest = Digest.sha256(content);
    AtomicLong sent = new AtomicLong();
    BlobDownload d =
        new BlobDownload(
            digest,
            "test@" + digest,
            () -> store.newWriter(digest),
            (offset, ownerGaveUp) ->
                Mono.just(new UpstreamBlob(content.length, counted(content, 64 * 1024, sent))),
            scheduler,
            buffers,
            ORPHAN,
            0);
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
    assertThat(reader.done.get(20, TimeUnit.SECONDS)).isEqualTo(content);
  }

  @Test
  void aTransferThatBreaksOffIsResumedFromTheNextByteAndReadersSeeNoBreak() throws Exception {
    byte[] content = random(2 * 1024 * 1024 + 3);
    Digest digest = Digest.sha256(content);
    int cut1 = content.length * 3 / 10;
    int cut2 = content.length * 6 / 10;
    List<Long> offsets = new CopyOnWriteArrayList<>();
    BlobDownload.Source source =
        (offset, ownerGaveUp) -> {
          offsets.add(offset);
          int from = (int) offset;
          int to = from < cut1 ? cut1 : from < cut2 ? cut2 : content.length;
          Flux<DataBuffer> body = chunks(Arrays.copyOfRange(content, from, to), 64 * 1024);
          if (to < content.length) {
            body = body.concatWith(Flux.error(new IOException("connection reset by upstream")));
          }
          return Mono.just(new UpstreamBlob(content.length, body));
        };
    BlobDownload d =
        new BlobDownload(
            digest,
            "test@" + digest,
            () -> store.newWriter(digest),
            source,
            scheduler,
            buffers,
            ORPHAN,
            3);
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
    BlobDownload.Source alwaysBreaks =
        (offset, ownerGaveUp) -> {
          opened.incrementAndGet();
          int from = (int) offset;
          return Mono.just(
              new UpstreamBlob(
                  content.length,
                  chunks(Arrays.copyOfRange(content, from, from + 1000), 500)
                      .concatWith(Flux.error(new IOException("connection reset by upstream")))));
        };
    BlobDownload d =
        new BlobDownload(
            digest,
            "test@" + digest,
            () -> store.newWriter(digest),
            alwaysBreaks,
            scheduler,
            buffers,
            ORPHAN,
            2);
    d.start();
    Throwable error =
        d.completion()
            .then(Mono.<Throwable>empty())
            .onErrorResume(Mono::just)
            .block(Duration.ofSeconds(20));
    assertThat(error).hasMessageContaining("connection reset");
    assertThat(opened).hasValue(3); // the request and two resumes
    assertThat(store.size(digest)).isEmpty();
    assertThat(tmpFiles()).isZero();
  }

  // ---- Readers joining a cold fill at every stage, the last byte held back: none left unwoken ---

  /** The size of the blob whose cold request once went unanswered. */
  private static final int SMALL = 5632;

  /**
   * Where a thread of the download waits until the test lets it go on: bounded, so a failing test
   * ends.
   */
  private static final class Gate {
    private volatile boolean held;
    private final AtomicInteger arrivals = new AtomicInteger();
    private final CountDownLatch open = new CountDownLatch(1);

    Gate hold() {
      held = true;
      return this;
    }

    void pass() {
      if (!held) {
        return;
      }
      arrivals.incrementAndGet();
      try {
        if (!open.await(10, TimeUnit.SECONDS)) {
          throw new IllegalStateException("the test never opened the gate");
        }
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
        throw new IllegalStateException(e);
      }
    }

    void awaitArrivals(int n) {
      await().atMost(Duration.ofSeconds(5)).until(() -> arrivals.get() >= n);
    }

    void open() {
      open.countDown();
    }
  }

  /** A store writer with hooks before each step (on the thread that takes it). */
  private static class Wrapped implements ContentWriter {
    private final ContentWriter w;

    Wrapped(ContentWriter w) {
      this.w = w;
    }

    void beforeAppend() {}

    void beforeVerify() {}

    void beforeCommit() {}

    void beforeOpen() {}

    @Override
    public Digest digest() {
      return w.digest();
    }

    @Override
    public long written() {
      return w.written();
    }

    @Override
    public void append(ByteBuffer bytes) throws IOException {
      beforeAppend();
      w.append(bytes);
    }

    @Override
    public void append(ByteBuffer[] bytes) throws IOException {
      beforeAppend();
      w.append(bytes);
    }

    @Override
    public void reserve(long size) throws IOException {
      w.reserve(size);
    }

    @Override
    public SeekableByteChannel openReader() throws IOException {
      beforeOpen();
      return w.openReader();
    }

    @Override
    public long verify(long expectedSize) {
      beforeVerify();
      return w.verify(expectedSize);
    }

    @Override
    public long commit(long expectedSize) throws IOException {
      beforeCommit();
      return w.commit(expectedSize);
    }

    @Override
    public void abort() {
      w.abort();
    }

    @Override
    public void ownerGaveUp() {
      w.ownerGaveUp();
    }
  }

  /**
   * A store writer whose steps the test holds: the {@code heldAppend}-th append, the verify, the
   * commit, readers' opening.
   */
  private static final class HeldWriter extends Wrapped {
    final Gate append = new Gate();
    final Gate verify = new Gate();
    final Gate commit = new Gate();
    final Gate openReader = new Gate();
    private final int heldAppend;
    private final AtomicInteger appends = new AtomicInteger();

    HeldWriter(ContentWriter w, int heldAppend) {
      super(w);
      this.heldAppend = heldAppend;
    }

    @Override
    void beforeAppend() {
      if (appends.incrementAndGet() == heldAppend) {
        append.pass();
      }
    }

    @Override
    void beforeVerify() {
      verify.pass();
    }

    @Override
    void beforeCommit() {
      commit.pass();
    }

    @Override
    void beforeOpen() {
      openReader.pass();
    }
  }

  /**
   * The storage scheduler as a download sees it: the fill's worker on {@code fill}, readers' file
   * reads (its {@code schedule} calls) on {@code reads} — a store step the test holds blocks a
   * thread of its scheduler, and a read queued behind it would wait for the test — counted, and
   * queued while held.
   */
  private static final class FileReads implements Scheduler {
    private final Scheduler fill;
    private final Scheduler reads;
    private final AtomicInteger count = new AtomicInteger();
    private final List<Runnable> queued = new ArrayList<>();
    private boolean holding;

    FileReads(Scheduler fill, Scheduler reads) {
      this.fill = fill;
      this.reads = reads;
    }

    @Override
    public Disposable schedule(Runnable task) {
      count.incrementAndGet();
      synchronized (this) {
        if (holding) {
          queued.add(task);
          return () -> {};
        }
      }
      return reads.schedule(task);
    }

    @Override
    public Worker createWorker() {
      return fill.createWorker();
    }

    int count() {
      return count.get();
    }

    synchronized void hold() {
      holding = true;
    }

    synchronized int queued() {
      return queued.size();
    }

    void release() {
      List<Runnable> go;
      synchronized (this) {
        holding = false;
        go = new ArrayList<>(queued);
        queued.clear();
      }
      go.forEach(reads::schedule);
    }
  }

  /** How a {@link Probe} asks for buffers. */
  private enum Demand {
    /** Everything, on subscribing. */
    ALL,
    /** One on subscribing, one more in each {@code onNext}. */
    ONE_SYNC,
    /** One on subscribing, one more after each buffer from another thread. */
    ONE_ASYNC,
    /** Two on subscribing, one more after each buffer from another thread. */
    TWO_ASYNC,
    /** One on subscribing, then everything from another thread (as the server's writer does). */
    FIRST_THEN_ALL,
    /** What the test asks for, by hand ({@link Probe#ask}). */
    MANUAL
  }

  /**
   * A client of a download: keeps the bytes it gets, asks for buffers as its {@link Demand} says.
   */
  private static final class Probe extends BaseSubscriber<DataBuffer> {
    final String name;
    private final Demand demand;
    private final long initial;
    private final Executor others;
    private final ByteArrayOutputStream bytes = new ByteArrayOutputStream();
    final CompletableFuture<byte[]> done = new CompletableFuture<>();
    private final AtomicLong asked = new AtomicLong();
    private int buffers;

    Probe(String name, Demand demand, long initial, Executor others) {
      this.name = name;
      this.demand = demand;
      this.initial = initial;
      this.others = others;
    }

    static Probe of(String name, Demand demand, Executor others) {
      return new Probe(name, demand, 0, others);
    }

    /** Asks for {@code initial} buffers on subscribing, then only when the test asks. */
    static Probe manual(String name, long initial) {
      return new Probe(name, Demand.MANUAL, initial, null);
    }

    void ask(long n) {
      asked.getAndUpdate(a -> a + n < 0 ? Long.MAX_VALUE : a + n);
      request(n);
    }

    @Override
    protected void hookOnSubscribe(Subscription s) {
      switch (demand) {
        case ALL -> ask(Long.MAX_VALUE);
        case ONE_SYNC, ONE_ASYNC, FIRST_THEN_ALL -> ask(1);
        case TWO_ASYNC -> ask(2);
        case MANUAL -> {
          if (initial > 0) {
            ask(initial);
          }
        }
      }
    }

    @Override
    protected void hookOnNext(DataBuffer b) {
      int n;
      synchronized (this) {
        byte[] chunk = new byte[b.readableByteCount()];
        b.read(chunk);
        bytes.writeBytes(chunk);
        n = ++buffers;
      }
      DataBufferUtils.release(b);
      switch (demand) {
        case ONE_SYNC -> ask(1);
        case ONE_ASYNC, TWO_ASYNC -> others.execute(() -> ask(1));
        case FIRST_THEN_ALL -> {
          if (n == 1) {
            others.execute(() -> ask(Long.MAX_VALUE));
          }
        }
        default -> {}
      }
    }

    @Override
    protected void hookOnComplete() {
      done.complete(bytes());
    }

    @Override
    protected void hookOnError(Throwable e) {
      done.completeExceptionally(e);
    }

    synchronized int received() {
      return bytes.size();
    }

    synchronized int buffers() {
      return buffers;
    }

    synchronized byte[] bytes() {
      return bytes.toByteArray();
    }

    /** What it got, within a few seconds. */
    byte[] result() throws Exception {
      return done.get(5, TimeUnit.SECONDS);
    }

    String describe() {
      String end =
          !done.isDone()
              ? "not ended"
              : done.isCompletedExceptionally()
                  ? "failed: " + done.handle((v, e) -> String.valueOf(e)).join()
                  : "completed";
      return name
          + " ("
          + demand
          + "): "
          + received()
          + " bytes in "
          + buffers()
          + " buffers, asked for "
          + asked.get()
          + ", "
          + end;
    }
  }

  /**
   * A cold fill of {@code content}, sent by the upstream in buffers of the given sizes (the rest in
   * one more).
   */
  private BlobDownload cold(
      Digest digest, byte[] content, ContentWriter writer, Scheduler storage, int... buffers) {
    List<DataBuffer> parts = new ArrayList<>();
    int at = 0;
    for (int i = 0; i < buffers.length && at < content.length; i++) {
      int to = Math.min(content.length, at + buffers[i]);
      parts.add(DefaultDataBufferFactory.sharedInstance.wrap(Arrays.copyOfRange(content, at, to)));
      at = to;
    }
    if (at < content.length) {
      parts.add(
          DefaultDataBufferFactory.sharedInstance.wrap(
              Arrays.copyOfRange(content, at, content.length)));
    }
    BlobDownload d =
        new BlobDownload(
            digest,
            "test@" + digest,
            () -> writer,
            (offset, ownerGaveUp) ->
                Mono.just(new UpstreamBlob(content.length, Flux.fromIterable(parts))),
            storage,
            this.buffers,
            ORPHAN,
            0);
    d.start();
    return d;
  }

  /**
   * No reader reads the file for {@code millis} (one read that was under way may end meanwhile).
   */
  private static void assertNoFileReadsFor(FileReads reads, long millis) {
    int before = reads.count();
    await("no file reads while there is nothing new to read")
        .during(Duration.ofMillis(millis))
        .atMost(Duration.ofMillis(millis).plusSeconds(5))
        .pollInterval(Duration.ofMillis(10))
        .untilAsserted(
            () ->
                assertThat(reads.count() - before)
                    .as("file reads while there was nothing new to read")
                    .isLessThanOrEqualTo(1));
  }

  private static void assertNoneEnded(Probe... probes) {
    for (Probe p : probes) {
      assertThat(p.done).as(p.describe()).isNotDone();
    }
  }

  /**
   * The blob that once went unanswered, in one or two upstream buffers, all written and its verify
   * held: readers joining now (asking for everything, one buffer at a time, one buffer only,
   * nothing yet, only the last byte) read all but the last byte from the file, then wait for it
   * without reading the file again, and all end with the blob once it is verified.
   */
  @ParameterizedTest(name = "first upstream buffer of {0} bytes")
  @ValueSource(ints = {SMALL, 4096, SMALL - 1, 1})
  void readersJoiningWhileTheLastByteIsHeldGetItOnceVerified(int firstBuffer) throws Exception {
    byte[] content = random(SMALL);
    Digest digest = Digest.sha256(content);
    FileReads reads = new FileReads(scheduler, readScheduler);
    HeldWriter held = new HeldWriter(store.newWriter(digest), 0);
    held.verify.hold();
    BlobDownload d = cold(digest, content, held, reads, firstBuffer);
    held.verify.awaitArrivals(1); // every byte is written; the last is not handed out yet

    Probe all = Probe.of("all", Demand.ALL, null);
    Probe one = Probe.of("one at a time", Demand.ONE_SYNC, null);
    Probe first = Probe.manual("one buffer, then the rest later", 1);
    Probe late = Probe.manual("no demand at first", 0);
    Probe last = Probe.of("the last byte only", Demand.ALL, null);
    d.read(0, -1).subscribe(all);
    d.read(0, -1).subscribe(one);
    d.read(0, -1).subscribe(first);
    d.read(0, -1).subscribe(late);
    d.read(SMALL - 1, SMALL - 1).subscribe(last);
    await()
        .atMost(Duration.ofSeconds(5))
        .untilAsserted(
            () -> {
              assertThat(all.received()).isEqualTo(SMALL - 1);
              assertThat(one.received()).isEqualTo(SMALL - 1);
              assertThat(first.buffers()).isEqualTo(1);
            });
    first.ask(Long.MAX_VALUE);
    late.ask(Long.MAX_VALUE);
    await()
        .atMost(Duration.ofSeconds(5))
        .untilAsserted(
            () -> {
              assertThat(first.received()).isEqualTo(SMALL - 1);
              assertThat(late.received()).isEqualTo(SMALL - 1);
            });
    assertNoFileReadsFor(reads, 150);
    assertNoneEnded(all, one, first, late, last);

    held.verify.open();
    for (Probe p : List.of(all, one, first, late)) {
      assertThat(Digest.sha256(p.result())).as(p.describe()).isEqualTo(digest);
    }
    assertThat(last.result()).containsExactly(content[SMALL - 1]);
    assertThat(d.completion().block(Duration.ofSeconds(5))).isEqualTo(SMALL);
  }

  /**
   * A blob of one and a half write batches; readers join while its first batch is being written
   * (all of it in memory) or right after (the first batch only in the file): they get all but the
   * last byte while the store is held, without reading the file again, then the whole blob.
   */
  @ParameterizedTest(name = "joining while append {0} is held")
  @ValueSource(ints = {1, 2})
  void readersJoiningAroundABatchWriteGetAllButTheLastByteThenTheBlob(int heldAppend)
      throws Exception {
    byte[] content = random(BlobDownload.WRITE_BATCH_BYTES * 3 / 2 + 5);
    Digest digest = Digest.sha256(content);
    FileReads reads = new FileReads(scheduler, readScheduler);
    HeldWriter held = new HeldWriter(store.newWriter(digest), heldAppend);
    held.append.hold();
    BlobDownload d =
        new BlobDownload(
            digest,
            "test@" + digest,
            () -> held,
            (offset, ownerGaveUp) ->
                Mono.just(new UpstreamBlob(content.length, chunks(content, 64 * 1024))),
            reads,
            buffers,
            ORPHAN,
            0);
    d.start();
    held.append.awaitArrivals(1);

    Probe all = Probe.of("all", Demand.ALL, null);
    Probe one = Probe.of("one at a time", Demand.ONE_SYNC, null);
    Probe first = Probe.manual("one buffer, then the rest later", 1);
    Probe late = Probe.manual("no demand at first", 0);
    for (Probe p : List.of(all, one, first, late)) {
      d.read(0, -1).subscribe(p);
    }
    int mostLive = content.length - 1;
    await()
        .atMost(Duration.ofSeconds(5))
        .untilAsserted(
            () -> {
              assertThat(all.received()).isEqualTo(mostLive);
              assertThat(one.received()).isEqualTo(mostLive);
              assertThat(first.buffers()).isEqualTo(1);
            });
    first.ask(Long.MAX_VALUE);
    late.ask(Long.MAX_VALUE);
    await()
        .atMost(Duration.ofSeconds(5))
        .untilAsserted(
            () -> {
              assertThat(first.received()).isEqualTo(mostLive);
              assertThat(late.received()).isEqualTo(mostLive);
            });
    assertNoFileReadsFor(reads, 150);
    assertNoneEnded(all, one, first, late);

    held.append.open();
    for (Probe p : List.of(all, one, first, late)) {
      assertThat(p.result()).as(p.describe()).isEqualTo(content);
    }
    assertThat(d.completion().block(Duration.ofSeconds(5))).isEqualTo(content.length);
  }

  /** Where a reader's first file read waits while the last byte is verified. */
  enum HeldRead {
    /**
     * Begun (what may be read, all but the last byte, taken before the verify), opening the file.
     */
    OPENING_THE_FILE,
    /** Scheduled, not begun. */
    SCHEDULED
  }

  /**
   * Readers whose file read is under way when the last byte is verified (and told to live and
   * waiting readers) end with the blob, one asking for more only afterwards too.
   */
  @ParameterizedTest
  @EnumSource(HeldRead.class)
  void aFileReadUnderWayWhenTheLastByteIsVerifiedEndsWithTheBlob(HeldRead where) throws Exception {
    byte[] content = random(SMALL);
    Digest digest = Digest.sha256(content);
    FileReads reads = new FileReads(scheduler, readScheduler);
    HeldWriter held = new HeldWriter(store.newWriter(digest), 0);
    held.verify.hold();
    held.commit.hold();
    if (where == HeldRead.OPENING_THE_FILE) {
      held.openReader.hold();
    } else {
      reads.hold();
    }
    BlobDownload d = cold(digest, content, held, reads, 4096);
    held.verify.awaitArrivals(1);

    Probe all = Probe.of("all", Demand.ALL, null);
    Probe one = Probe.of("one at a time", Demand.ONE_SYNC, null);
    Probe first = Probe.manual("one buffer, then the rest later", 1);
    for (Probe p : List.of(all, one, first)) {
      d.read(0, -1).subscribe(p);
    }
    if (where == HeldRead.OPENING_THE_FILE) {
      held.openReader.awaitArrivals(3);
    } else {
      await().atMost(Duration.ofSeconds(5)).until(() -> reads.queued() == 3);
    }
    held.verify.open();
    held.commit.awaitArrivals(1); // verified, and readers told; the commit waits
    if (where == HeldRead.OPENING_THE_FILE) {
      held.openReader.open();
    } else {
      reads.release();
    }
    assertThat(all.result()).as(all.describe()).isEqualTo(content);
    assertThat(one.result()).as(one.describe()).isEqualTo(content);
    await().atMost(Duration.ofSeconds(5)).until(() -> first.buffers() >= 1);
    first.ask(Long.MAX_VALUE);
    assertThat(first.result()).as(first.describe()).isEqualTo(content);
    held.commit.open();
    assertThat(d.completion().block(Duration.ofSeconds(5))).isEqualTo(SMALL);
  }

  /**
   * A reader slower than the store but keeping up (the fill waits for it) takes every byte from
   * memory, the last byte too: the file is never read back.
   */
  @Test
  void aReaderKeepingUpSlowerThanTheStoreNeverReadsTheFileBack() throws Exception {
    byte[] content = random(8 * 1024 * 1024 + 11);
    Digest digest = Digest.sha256(content);
    FileReads reads = new FileReads(scheduler, readScheduler);
    ExecutorService clients = Executors.newSingleThreadExecutor();
    try {
      BlobDownload d =
          new BlobDownload(
              digest,
              "test@" + digest,
              () -> store.newWriter(digest),
              (offset, ownerGaveUp) ->
                  Mono.just(new UpstreamBlob(content.length, chunks(content, 64 * 1024))),
              reads,
              buffers,
              ORPHAN,
              0);
      // one buffer at a time, each asked for 0.2 ms after the last arrived: slower than the store
      Probe reader =
          Probe.of(
              "one buffer at a time, slowly",
              Demand.ONE_ASYNC,
              task ->
                  clients.execute(
                      () -> {
                        LockSupport.parkNanos(200_000);
                        task.run();
                      }));
      d.read(0, -1).subscribe(reader);
      d.start();
      assertThat(reader.done.get(30, TimeUnit.SECONDS)).isEqualTo(content);
      assertThat(reads.count()).as("file reads").isZero();
    } finally {
      clients.shutdownNow();
    }
  }

  /**
   * The upstream's buffers are reference counted (the upstream client's are pooled direct memory):
   * a reader that still wants bytes when the blob is stored, one that stops half-way and one that
   * reads to the end all leave every buffer released.
   */
  @Test
  void everyUpstreamBufferIsReleasedOnceTheBlobIsStoredAndItsReadersAreDone() throws Exception {
    byte[] content = random(3 * 64 * 1024 + 5);
    Digest digest = Digest.sha256(content);
    NettyDataBufferFactory netty = new NettyDataBufferFactory(UnpooledByteBufAllocator.DEFAULT);
    List<ByteBuf> sent = new ArrayList<>();
    for (int at = 0; at < content.length; at += 64 * 1024) {
      int to = Math.min(content.length, at + 64 * 1024);
      sent.add(Unpooled.directBuffer(to - at).writeBytes(content, at, to - at));
    }
    BlobDownload d =
        new BlobDownload(
            digest,
            "test@" + digest,
            () -> store.newWriter(digest),
            (offset, ownerGaveUp) ->
                Mono.just(
                    new UpstreamBlob(content.length, Flux.fromIterable(sent).map(netty::wrap))),
            scheduler,
            buffers,
            ORPHAN,
            0);
    Probe lagging = Probe.manual("no demand until the blob is stored", 0);
    Probe stopping = Probe.manual("one buffer, then cancels", 1);
    d.read(0, -1).subscribe(lagging);
    d.read(0, -1).subscribe(stopping);
    d.start();
    assertThat(d.completion().block(Duration.ofSeconds(10))).isEqualTo(content.length);
    stopping.cancel();
    lagging.ask(Long.MAX_VALUE);
    assertThat(lagging.result()).isEqualTo(content);
    assertThat(sent)
        .allSatisfy(
            b -> assertThat(b.refCnt()).as("reference count of an upstream buffer").isZero());
  }

  /**
   * A client whose connection holds up to {@code held} buffers (a response queues and writes 32)
   * and lets one go every {@code pauseNanos}: the shape of a slow TCP client behind Netty.
   */
  private static final class HoldingClient extends BaseSubscriber<DataBuffer> {
    private final LinkedBlockingQueue<DataBuffer> held = new LinkedBlockingQueue<>();
    private final int most;
    private final long pauseNanos;
    private final Runnable sample;
    private final MessageDigest sha256;
    final CompletableFuture<String> done = new CompletableFuture<>();
    private volatile boolean ended;

    HoldingClient(int most, long pauseNanos, Runnable sample) throws Exception {
      this.most = most;
      this.pauseNanos = pauseNanos;
      this.sample = sample;
      this.sha256 = MessageDigest.getInstance("SHA-256");
    }

    @Override
    protected void hookOnSubscribe(Subscription s) {
      request(most);
    }

    @Override
    protected void hookOnNext(DataBuffer b) {
      held.add(b);
    }

    @Override
    protected void hookOnComplete() {
      ended = true;
    }

    @Override
    protected void hookOnError(Throwable e) {
      ended = true;
      done.completeExceptionally(e);
    }

    /** Drains on the calling thread until the body ended and every buffer was let go. */
    void drain() {
      try {
        while (!(ended && held.isEmpty()) && !done.isDone()) {
          DataBuffer b = held.poll(1, TimeUnit.MILLISECONDS);
          if (b == null) {
            continue;
          }
          sample.run();
          LockSupport.parkNanos(pauseNanos);
          try (DataBuffer.ByteBufferIterator it = b.readableByteBuffers()) {
            it.forEachRemaining(sha256::update);
          }
          DataBufferUtils.release(b);
          request(1);
        }
        done.complete("sha256:" + HexFormat.of().formatHex(sha256.digest()));
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
        done.completeExceptionally(e);
      }
    }
  }

  /**
   * Ten clients on one cold 48 MiB blob, each letting its buffers go at its own pace while its
   * connection holds up to 32 of them: the direct memory they pin is the readers' buffers, within
   * their budget, and the upstream's buffers stay within the fill's own bound however far apart the
   * clients are. (Readers once sent slices of the upstream's 1 MiB buffers, each keeping its whole
   * buffer alive: ten such clients pinned tens of MiB and had Netty fail responses under a 32 MiB
   * {@code MaxDirectMemorySize}.)
   */
  @Test
  void tenClientsOfALargeBlobPinNoMoreThanTheReadersBudgetAndTheFillsWindow() throws Exception {
    int mib = 1 << 20;
    byte[] content = random(48 * mib);
    Digest digest = Digest.sha256(content);
    UnpooledByteBufAllocator upstreamAlloc = new UnpooledByteBufAllocator(true);
    NettyDataBufferFactory upstreamBuffers = new NettyDataBufferFactory(upstreamAlloc);
    buffers = new ReaderBuffers(DataSize.ofMegabytes(4));
    AtomicLong upstreamPeak = new AtomicLong();
    AtomicInteger lentPeak = new AtomicInteger();
    Runnable sample =
        () -> {
          upstreamPeak.accumulateAndGet(upstreamAlloc.metric().usedDirectMemory(), Math::max);
          lentPeak.accumulateAndGet(buffers.lent(), Math::max);
        };
    Flux<DataBuffer> body =
        Flux.range(0, 48)
            .map(
                i ->
                    upstreamBuffers.wrap(
                        upstreamAlloc.directBuffer(mib).writeBytes(content, i * mib, mib)));
    BlobDownload d =
        new BlobDownload(
            digest,
            "test@" + digest,
            () -> store.newWriter(digest),
            (offset, ownerGaveUp) -> Mono.just(new UpstreamBlob(content.length, body)),
            scheduler,
            buffers,
            ORPHAN,
            0);
    NettyDataBufferFactory responses = new NettyDataBufferFactory(UnpooledByteBufAllocator.DEFAULT);
    List<HoldingClient> clients = new ArrayList<>();
    ExecutorService drainers = Executors.newFixedThreadPool(10);
    try {
      for (int i = 0; i < 10; i++) {
        HoldingClient c = new HoldingClient(32, i * 20_000L, sample);
        clients.add(c);
        d.read(0, -1, responses).subscribe(c);
        drainers.execute(c::drain);
      }
      d.start();
      for (HoldingClient c : clients) {
        assertThat(c.done.get(120, TimeUnit.SECONDS)).isEqualTo(digest.toString());
      }
    } finally {
      drainers.shutdownNow();
    }
    assertThat(d.completion().block(Duration.ofSeconds(10))).isEqualTo(content.length);
    // the fill's own bound: the upstream prefetch (4 buffers), batches being written
    // (MAX_UNWRITTEN_BYTES) and the pace ahead of the fastest reader (PACE_BYTES), in 1 MiB buffers
    long fillBound =
        4L * mib + BlobDownload.MAX_UNWRITTEN_BYTES + BlobDownload.PACE_BYTES + 2L * mib;
    assertThat(upstreamPeak.get())
        .as("upstream direct memory held while ten clients read (bytes)")
        .isLessThanOrEqualTo(fillBound);
    assertThat(lentPeak.get()).as("reader buffers lent at once").isBetween(1, buffers.max());
    await().atMost(Duration.ofSeconds(5)).until(() -> buffers.lent() == 0);
    assertThat(upstreamAlloc.metric().usedDirectMemory()).isZero();
  }

  /**
   * Readers joining after the verify read the whole blob from the file, while the commit is held
   * and after it.
   */
  @Test
  void readersJoiningAfterTheVerifyGetTheBlobFromTheFileWhileTheCommitIsHeldAndAfter()
      throws Exception {
    byte[] content = random(SMALL);
    Digest digest = Digest.sha256(content);
    HeldWriter held = new HeldWriter(store.newWriter(digest), 0);
    held.commit.hold();
    BlobDownload d = cold(digest, content, held, new FileReads(scheduler, readScheduler), SMALL);
    held.commit.awaitArrivals(1);
    Probe all = Probe.of("all", Demand.ALL, null);
    Probe one = Probe.of("one at a time", Demand.ONE_SYNC, null);
    d.read(0, -1).subscribe(all);
    d.read(0, -1).subscribe(one);
    assertThat(all.result()).as(all.describe()).isEqualTo(content);
    assertThat(one.result()).as(one.describe()).isEqualTo(content);
    assertThat(d.completion().toFuture()).isNotDone();

    held.commit.open();
    assertThat(d.completion().block(Duration.ofSeconds(5))).isEqualTo(SMALL);
    Probe after = Probe.of("after the commit", Demand.ONE_SYNC, null);
    d.read(0, -1).subscribe(after);
    assertThat(after.result()).as(after.describe()).isEqualTo(content);
  }

  /**
   * A reader that cannot get buffers for the written file (the JVM's direct-memory limit, an Error)
   * fails at once with an {@link java.io.IOException} instead of waiting for nothing (seen in the
   * chaos soak: the client waited for its timeout); the download and another reader go on.
   */
  @Test
  void aReaderThatCannotGetBuffersForTheFileFailsInsteadOfHanging() throws Exception {
    byte[] content = random(SMALL);
    Digest digest = Digest.sha256(content);
    HeldWriter held = new HeldWriter(store.newWriter(digest), 0);
    held.commit.hold();
    buffers =
        new ReaderBuffers(
            DataSize.ofMegabytes(1),
            () -> {
              throw new OutOfMemoryError("Cannot reserve 65536 bytes of direct buffer memory");
            });
    BlobDownload d = cold(digest, content, held, new FileReads(scheduler, readScheduler), SMALL);
    held.commit.awaitArrivals(1);

    StepVerifier.create(d.read(0, -1, new NettyDataBufferFactory(UnpooledByteBufAllocator.DEFAULT)))
        .expectErrorSatisfies(
            e ->
                assertThat(e)
                    .isInstanceOf(IOException.class)
                    .hasMessageContaining("no memory for the response's buffers"))
        .verify(Duration.ofSeconds(5));

    Probe other = Probe.of("another reader", Demand.ALL, null);
    d.read(0, -1).subscribe(other);
    assertThat(other.result()).as(other.describe()).isEqualTo(content);
    held.commit.open();
    assertThat(d.completion().block(Duration.ofSeconds(5))).isEqualTo(SMALL);
  }

  /**
   * A range read from the file before the verify: the reader has its bytes and waits for the verify
   * (which ends it) without reading the file again meanwhile.
   */
  @Test
  void aRangeReadFromTheFileWaitsForTheVerifyWithoutReadingTheFileAgain() throws Exception {
    byte[] content = random(SMALL);
    Digest digest = Digest.sha256(content);
    FileReads reads = new FileReads(scheduler, readScheduler);
    HeldWriter held = new HeldWriter(store.newWriter(digest), 0);
    held.verify.hold();
    BlobDownload d = cold(digest, content, held, reads, SMALL);
    held.verify.awaitArrivals(1);
    Probe range = Probe.of("bytes 100-1099", Demand.ALL, null);
    d.read(100, 1099).subscribe(range);
    await().atMost(Duration.ofSeconds(5)).until(() -> range.received() == 1000);
    assertNoFileReadsFor(reads, 150);
    assertNoneEnded(range);
    held.verify.open();
    assertThat(range.result()).isEqualTo(Arrays.copyOfRange(content, 100, 1100));
  }

  /**
   * A live reader whose demand comes one buffer at a time from a thread asking again and again (so
   * it looks at its queue and the download's state over and over) while the worker verifies and
   * queues the last byte: it must never end without that byte. Many small fills, the commit a
   * no-op, so the race of the reader's end check with the verify is met often.
   */
  @Test
  void aReaderAskingOverAndOverWhileItsLastByteIsVerifiedNeverEndsWithoutIt() throws Exception {
    Path tmp = root.resolve("tmp");
    Random rnd = new Random(1);
    int iterations = 400;
    for (int i = 0; i < iterations; i++) {
      byte[] content = new byte[16 + rnd.nextInt(240)];
      rnd.nextBytes(content);
      Digest digest = Digest.sha256(content);
      Path temp = tmp.resolve("poll-" + i + ".part");
      BlobWriter file = new BlobWriter(digest, temp, KEEP_IN_PLACE);
      ContentWriter writer =
          new Wrapped(file) {
            @Override
            public long commit(long expectedSize) {
              return verify(expectedSize); // no force, no rename: the race is before it
            }
          };
      Probe reader = Probe.manual("asking one buffer at a time, over and over", 0);
      BlobDownload d =
          new BlobDownload(
              digest,
              "poll " + i,
              () -> writer,
              (offset, ownerGaveUp) ->
                  Mono.just(
                      new UpstreamBlob(
                          content.length,
                          Flux.just(DefaultDataBufferFactory.sharedInstance.wrap(content)))),
              scheduler,
              buffers,
              ORPHAN,
              0);
      d.read(0, -1).subscribe(reader); // there from the first byte: live
      Thread asker =
          new Thread(
              () -> {
                while (!reader.done.isDone() && !Thread.currentThread().isInterrupted()) {
                  reader.ask(1);
                }
              });
      asker.start();
      try {
        d.start();
        byte[] got = reader.done.get(5, TimeUnit.SECONDS);
        assertThat(got).as("iteration " + i + ": " + reader.describe()).isEqualTo(content);
      } catch (TimeoutException e) {
        fail("iteration " + i + ": " + reader.describe() + "\n  " + dump(d));
      } finally {
        asker.interrupt();
        asker.join(5000);
      }
      file.abort();
    }
  }

  /** A store writer that pauses a little, at random, before each step. */
  private static final class Jittery extends Wrapped {
    Jittery(ContentWriter w) {
      super(w);
    }

    static void pause(long maxNanos) {
      var rnd = ThreadLocalRandom.current();
      switch (rnd.nextInt(4)) {
        case 0 -> {}
        case 1 -> Thread.yield();
        default -> LockSupport.parkNanos(rnd.nextLong(maxNanos));
      }
    }

    @Override
    void beforeAppend() {
      pause(300_000);
    }

    @Override
    void beforeVerify() {
      pause(300_000);
    }

    @Override
    void beforeCommit() {
      pause(300_000);
    }

    @Override
    void beforeOpen() {
      pause(100_000);
    }
  }

  /** The download's and its open readers' state, for a failure message (read without its lock). */
  /** What a stuck download and the readers' buffers look like, for a failure's message. */
  private String dump(BlobDownload d) {
    try {
      FillWindow window = (FillWindow) field(d, "window");
      return "window: "
          + window.view()
          + ", readers "
          + window.readers()
          + "; reader buffers lent "
          + buffers.lent()
          + " of "
          + buffers.max();
    } catch (ReflectiveOperationException e) {
      return "(no dump: " + e + ")";
    }
  }

  private static Object field(Object o, String name) throws ReflectiveOperationException {
    var f = o.getClass().getDeclaredField(name);
    f.setAccessible(true);
    return f.get(o);
  }

  /**
   * Each upstream buffer is larger than {@link BlobDownload#PACE_BYTES}, so on every one the fill
   * decides to pause until its reader catches up, while the reader drains from other threads, and
   * more fills than cores run at once: every fill must end with its bytes. This is the shape of a
   * lost wake-up once seen in a skopeo pull through the S3 store (a reader that emptied its queue
   * while the fill was deciding to pause read "not paused" outside the lock and went away), but
   * that window is a few instructions wide and a finishing batch write closes it, so this test did
   * not reproduce it, even with the window widened by hand; it guards the pacing's liveness.
   */
  @Test
  void fillsPacedToReadersOnOtherThreadsAllEndWithTheirBytes() throws Exception {
    int buffer = BlobDownload.PACE_BYTES + 4096;
    int size = 6 * buffer;
    int atOnce = 6;
    int rounds = 10;
    ExecutorService clients = Executors.newFixedThreadPool(4);
    Scheduler upstreamThreads = Schedulers.newParallel("test-upstream", 4);
    try {
      for (int round = 0; round < rounds; round++) {
        List<BlobDownload> fills = new ArrayList<>();
        List<Probe> probes = new ArrayList<>();
        List<byte[]> contents = new ArrayList<>();
        for (int f = 0; f < atOnce; f++) {
          byte[] content = new byte[size];
          new Random(round * 100L + f).nextBytes(content);
          Digest digest = Digest.sha256(content);
          List<byte[]> parts = new ArrayList<>();
          for (int at = 0; at < size; at += buffer) {
            parts.add(Arrays.copyOfRange(content, at, Math.min(size, at + buffer)));
          }
          Flux<DataBuffer> body =
              Flux.fromIterable(parts)
                  .map(bytes -> (DataBuffer) DefaultDataBufferFactory.sharedInstance.wrap(bytes))
                  .publishOn(upstreamThreads, 2);
          BlobWriter writer =
              new BlobWriter(
                  digest, root.resolve("tmp").resolve("pace-" + round + "-" + f), KEEP_IN_PLACE);
          BlobDownload d =
              new BlobDownload(
                  digest,
                  "pace " + round + "/" + f,
                  () -> writer,
                  (offset, ownerGaveUp) -> Mono.just(new UpstreamBlob(size, body)),
                  scheduler,
                  buffers,
                  ORPHAN,
                  0);
          Probe p = Probe.of("reader of fill " + f, Demand.ONE_ASYNC, clients);
          d.read(0, -1).subscribe(p);
          fills.add(d);
          probes.add(p);
          contents.add(content);
        }
        fills.forEach(BlobDownload::start);
        for (int f = 0; f < atOnce; f++) {
          Probe p = probes.get(f);
          try {
            p.done.get(10, TimeUnit.SECONDS);
          } catch (TimeoutException e) {
            fail("round " + round + ": " + p.describe() + "\n  " + dump(fills.get(f)));
          }
          assertThat(p.bytes()).as("round " + round + ", fill " + f).isEqualTo(contents.get(f));
        }
      }
    } finally {
      clients.shutdownNow();
      upstreamThreads.dispose();
    }
  }

  /**
   * Many cold fills of small blobs (in one or two upstream buffers) and, every sixth, of one and a
   * half write batches; readers join each at random points (from two threads, with random pauses
   * against an upstream and a store that pause at random too), asking in random ways, some only for
   * the last byte. Every reader must end with exactly its bytes within a few seconds.
   */
  @Test
  void coldFillsWithReadersJoiningAtRandomPointsAllEndWithTheirBytes() throws Exception {
    long seed = System.nanoTime();
    Random rnd = new Random(seed);
    int iterations = 600;
    ExecutorService actors =
        Executors.newFixedThreadPool(3); // the upstream and two joining threads
    ExecutorService clients = Executors.newFixedThreadPool(2); // requests from elsewhere
    DataBufferFactory netty = new NettyDataBufferFactory(UnpooledByteBufAllocator.DEFAULT);
    Path tmp = root.resolve("tmp");
    Demand[] demands = {
      Demand.ALL,
      Demand.ONE_SYNC,
      Demand.ONE_ASYNC,
      Demand.TWO_ASYNC,
      Demand.FIRST_THEN_ALL,
      Demand.MANUAL
    };
    try {
      for (int i = 0; i < iterations; i++) {
        boolean large = i % 6 == 5;
        int size =
            large
                ? BlobDownload.WRITE_BATCH_BYTES * 3 / 2 + rnd.nextInt(4096)
                : 1024 + rnd.nextInt(7 * 1024);
        byte[] content = new byte[size];
        rnd.nextBytes(content);
        Digest digest = Digest.sha256(content);
        int[] buffers =
            large
                ? new int[] {new int[] {16 << 10, 64 << 10, 256 << 10, 1 << 20}[rnd.nextInt(4)]}
                : rnd.nextBoolean() ? new int[] {size} : new int[] {1 + rnd.nextInt(size - 1)};
        List<byte[]> parts = new ArrayList<>();
        for (int at = 0; at < size; ) {
          int to = buffers[0] >= size - at || (!large && at > 0) ? size : at + buffers[0];
          parts.add(Arrays.copyOfRange(content, at, to));
          at = to;
        }
        Path temp = tmp.resolve("stress-" + i + ".part");
        ContentWriter writer = new Jittery(new BlobWriter(digest, temp, KEEP_IN_PLACE));
        Sinks.Many<DataBuffer> upstream = Sinks.many().unicast().onBackpressureBuffer();
        BlobDownload d =
            new BlobDownload(
                digest,
                "stress " + i,
                () -> writer,
                (offset, ownerGaveUp) -> Mono.just(new UpstreamBlob(size, upstream.asFlux())),
                scheduler,
                this.buffers,
                ORPHAN,
                0);
        long pauseMax = large ? 4_000_000 : 1_500_000;

        int n = 3 + rnd.nextInt(4);
        List<Probe> probes = new ArrayList<>();
        List<byte[]> expected = new ArrayList<>();
        List<Runnable> joins = new ArrayList<>();
        for (int j = 0; j < n; j++) {
          Demand demand = demands[rnd.nextInt(demands.length)];
          boolean lastByte = rnd.nextInt(10) == 0;
          DataBufferFactory factory =
              rnd.nextBoolean() ? netty : DefaultDataBufferFactory.sharedInstance;
          Probe p =
              new Probe(
                  "reader "
                      + j
                      + (lastByte ? " of the last byte" : "")
                      + (factory == netty ? ", netty buffers" : ""),
                  demand,
                  0,
                  clients);
          probes.add(p);
          expected.add(lastByte ? new byte[] {content[size - 1]} : content);
          joins.add(
              () -> {
                (lastByte ? d.read(size - 1, size - 1, factory) : d.read(0, -1, factory))
                    .subscribe(p);
                if (demand == Demand.MANUAL) {
                  clients.execute(
                      () -> {
                        Jittery.pause(pauseMax);
                        p.ask(Long.MAX_VALUE);
                      });
                }
              });
        }
        // The reader whose request started the fill is there before its first byte; the others join
        // from two threads, while the upstream sends from a third.
        joins.remove(0).run();
        d.start();
        List<CompletableFuture<Void>> running = new ArrayList<>();
        // The upstream's buffers are reference counted, as the upstream client's are: every one
        // must be released once the fill and its readers are done with it.
        List<ByteBuf> sent = new CopyOnWriteArrayList<>();
        running.add(
            CompletableFuture.runAsync(
                () -> {
                  for (byte[] part : parts) {
                    Jittery.pause(pauseMax / 4);
                    ByteBuf buf = Unpooled.directBuffer(part.length).writeBytes(part);
                    sent.add(buf);
                    upstream.tryEmitNext(
                        new NettyDataBufferFactory(UnpooledByteBufAllocator.DEFAULT).wrap(buf));
                  }
                  upstream.tryEmitComplete();
                },
                actors));
        for (int t = 0; t < 2; t++) {
          List<Runnable> mine = new ArrayList<>();
          for (int j = t; j < joins.size(); j += 2) {
            mine.add(joins.get(j));
          }
          running.add(
              CompletableFuture.runAsync(
                  () -> {
                    for (Runnable join : mine) {
                      Jittery.pause(pauseMax);
                      join.run();
                    }
                  },
                  actors));
        }

        CompletableFuture<?>[] ends =
            probes.stream().map(p -> p.done).toArray(CompletableFuture[]::new);
        try {
          CompletableFuture.allOf(running.toArray(CompletableFuture[]::new))
              .get(5, TimeUnit.SECONDS);
          CompletableFuture.allOf(ends).get(5, TimeUnit.SECONDS);
        } catch (TimeoutException | ExecutionException e) {
          fail(
              "iteration "
                  + i
                  + " of "
                  + iterations
                  + " (seed "
                  + seed
                  + "): a blob of "
                  + size
                  + " bytes in "
                  + parts.size()
                  + " upstream buffers; "
                  + e
                  + "\n  "
                  + String.join("\n  ", probes.stream().map(Probe::describe).toList())
                  + "\n  "
                  + dump(d));
        }
        for (int j = 0; j < n; j++) {
          byte[] got = probes.get(j).bytes();
          if (!Arrays.equals(got, expected.get(j))) {
            fail(
                "iteration "
                    + i
                    + " (seed "
                    + seed
                    + "): "
                    + probes.get(j).describe()
                    + " got "
                    + got.length
                    + " bytes, not its "
                    + expected.get(j).length
                    + ", first difference at byte "
                    + Arrays.mismatch(got, expected.get(j))
                    + "\n  "
                    + dump(d));
          }
        }
        assertThat(d.completion().block(Duration.ofSeconds(5)))
            .as("iteration " + i)
            .isEqualTo(size);
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(2);
        while (sent.stream().anyMatch(b -> b.refCnt() > 0) && System.nanoTime() < deadline) {
          Thread.sleep(1);
        }
        assertThat(sent.stream().filter(b -> b.refCnt() > 0).count())
            .as(
                "iteration %d (seed %d): upstream buffers still held after the blob was stored and read; %s",
                i, seed, dump(d))
            .isZero();
        while (this.buffers.lent() > 0 && System.nanoTime() < deadline) {
          Thread.sleep(1);
        }
        assertThat(this.buffers.lent())
            .as(
                "iteration %d (seed %d): reader buffers still lent after every reader ended; %s\n  %s",
                i,
                seed,
                dump(d),
                String.join("\n  ", probes.stream().map(Probe::describe).toList()))
            .isZero();
        Files.deleteIfExists(temp);
      }
    } finally {
      actors.shutdownNow();
      clients.shutdownNow();
    }
  }
}
