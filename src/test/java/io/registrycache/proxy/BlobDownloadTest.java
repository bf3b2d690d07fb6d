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
          BlobDownload[] self = new BlobDownload[1];
          self[0] = new BlobDownload(d, "test@" + d, store, () -> {
            upstreamCalls.incrementAndGet();
            return source;
          }, scheduler, Duration.ofMinutes(1), () -> downloads.finished(d, self[0]));
          return self[0];
        },
        BlobDownload::start);
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

  /**
   * A {@link BlobStore} whose only working method is {@code newWriter}: a real {@link BlobWriter}
   * into {@code root/tmp} whose store step is {@code storing}.
   */
  private BlobStore storeWith(BlobWriter.Sink storing) {
    return (BlobStore) java.lang.reflect.Proxy.newProxyInstance(
        BlobStore.class.getClassLoader(),
        new Class<?>[] {BlobStore.class},
        (proxy, method, args) -> {
          if (method.getName().equals("newWriter")) {
            Digest d = (Digest) args[0];
            return new BlobWriter(d, root.resolve("tmp").resolve(d.hex() + ".part"), storing);
          }
          throw new UnsupportedOperationException(method.getName());
        });
  }

  @Test
  void readersGetTheLastByteOnceVerifiedWithoutWaitingForTheStoreToCommit() throws Exception {
    byte[] content = random(700_000);
    Digest digest = Digest.sha256(content);
    java.util.concurrent.CountDownLatch storing = new java.util.concurrent.CountDownLatch(1);
    java.util.concurrent.CountDownLatch release = new java.util.concurrent.CountDownLatch(1);
    BlobStore slow = storeWith(new BlobWriter.Sink() {
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
        () -> Mono.just(new UpstreamBlob(content.length, chunks(content, 64 * 1024))),
        scheduler, Duration.ofMinutes(1), () -> {});
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
    BlobStore failing = storeWith(new BlobWriter.Sink() {
      @Override
      public Path store(Path temp, long size) throws IOException {
        throw new IOException("No space left on device");
      }

      @Override
      public void closed(boolean stored) {}
    });
    BlobDownload d = new BlobDownload(digest, "test@" + digest, failing,
        () -> Mono.just(new UpstreamBlob(content.length, chunks(content, 64 * 1024))),
        scheduler, Duration.ofMinutes(1), () -> {});
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
}
