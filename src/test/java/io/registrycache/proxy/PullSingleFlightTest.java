package io.registrycache.proxy;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import io.registrycache.config.RegistryCacheProperties;
import io.registrycache.metrics.CacheMetrics;
import io.registrycache.oci.Digest;
import io.registrycache.oci.MediaTypes;
import io.registrycache.oci.Reference;
import io.registrycache.oci.RepositoryName;
import io.registrycache.storage.BlobStore;
import io.registrycache.storage.FileBlobStore;
import io.registrycache.storage.ManifestStore;
import io.registrycache.storage.StorageLayout;
import io.registrycache.upstream.Upstream;
import io.registrycache.upstream.UpstreamBlob;
import io.registrycache.upstream.UpstreamClient;
import io.registrycache.upstream.UpstreamManifest;
import io.registrycache.upstream.UpstreamManifestHead;
import io.registrycache.upstream.UpstreamTags;
import java.io.ByteArrayOutputStream;
import java.net.URI;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.time.Clock;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Random;
import java.util.Set;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.mockito.Mockito;
import org.springframework.core.io.buffer.DataBuffer;
import org.springframework.core.io.buffer.DataBufferUtils;
import org.springframework.core.io.buffer.DefaultDataBufferFactory;
import reactor.core.publisher.Flux;
import reactor.core.publisher.Mono;
import reactor.core.publisher.Sinks;
import reactor.core.scheduler.Scheduler;
import reactor.core.scheduler.Schedulers;

/**
 * The one single-flight, for manifests and blobs: twenty concurrent cold pulls make one upstream
 * request. The upstream holds its answer until the test opens a gate, so the pulls overlap.
 */
class PullSingleFlightTest {

  private static final int CLIENTS = 20;

  @TempDir Path root;
  private RegistryCacheProperties properties;
  private final Sinks.One<Boolean> gate = Sinks.one();
  private final AtomicInteger manifestGets = new AtomicInteger();
  private final AtomicInteger blobGets = new AtomicInteger();
  private final Upstream upstream =
      new Upstream(
          "local",
          "local.test",
          URI.create("http://127.0.0.1:9"),
          Set.of(),
          false,
          RegistryCacheProperties.upstream(Map.of()));
  private final RepositoryName name = RepositoryName.parse("team/app");
  private Scheduler scheduler;
  private BlobStore blobs;
  private ManifestStore manifests;
  private CacheMetrics metrics;
  private byte[] manifest;
  private byte[] blob;

  @BeforeEach
  void setUp() throws Exception {
    properties =
        RegistryCacheProperties.bind(Map.of("registry-cache.storage.path", root.toString()));
    StorageLayout layout = new StorageLayout(properties);
    blobs = new FileBlobStore(layout);
    manifests = new ManifestStore(layout, blobs, properties, Clock.systemUTC());
    metrics = new CacheMetrics(new SimpleMeterRegistry(), properties);
    scheduler = Schedulers.newBoundedElastic(8, 1000, "test-storage");
    blob = new byte[2 * 1024 * 1024 + 3];
    new Random(7).nextBytes(blob);
    manifest =
        ("{\"schemaVersion\":2,\"mediaType\":\""
                + MediaTypes.OCI_MANIFEST
                + "\",\"config\":{\"mediaType\":"
                + "\"application/vnd.oci.image.config.v1+json\",\"digest\":\""
                + Digest.sha256(blob)
                + "\",\"size\":"
                + blob.length
                + "},\"layers\":[]}")
            .getBytes(StandardCharsets.UTF_8);
  }

  @AfterEach
  void tearDown() {
    scheduler.dispose();
    blobs.close();
  }

  private final UpstreamClient upstreams =
      new UpstreamClient() {
        @Override
        public Mono<UpstreamManifest> getManifest(
            Upstream u, RepositoryName n, Reference reference, List<String> accept, int maxBytes) {
          manifestGets.incrementAndGet();
          return gate.asMono()
              .map(open -> new UpstreamManifest(manifest, MediaTypes.OCI_MANIFEST, null));
        }

        @Override
        public Mono<UpstreamManifestHead> headManifest(
            Upstream u, RepositoryName n, Reference reference, List<String> accept) {
          return Mono.error(new AssertionError("no HEAD expected"));
        }

        @Override
        public Mono<UpstreamBlob> getBlob(Upstream u, RepositoryName n, Digest digest) {
          blobGets.incrementAndGet();
          Flux<DataBuffer> body =
              gate.asMono()
                  .thenMany(Flux.range(0, (blob.length + 65535) / 65536))
                  .map(
                      i ->
                          DefaultDataBufferFactory.sharedInstance.wrap(
                              Arrays.copyOfRange(
                                  blob, i * 65536, Math.min(blob.length, (i + 1) * 65536))));
          return Mono.just(new UpstreamBlob(blob.length, body));
        }

        @Override
        public Mono<Long> headBlob(Upstream u, RepositoryName n, Digest digest) {
          return Mono.error(new AssertionError("no HEAD expected"));
        }

        @Override
        public Mono<UpstreamTags> listTags(
            Upstream u, RepositoryName n, Integer size, String last) {
          return Mono.error(new AssertionError("no tag list expected"));
        }
      };

  /** Opens the gate once the first upstream request was made and the others had time to join. */
  private void openGateAfter(AtomicInteger upstreamRequests) throws InterruptedException {
    await()
        .atMost(Duration.ofSeconds(5))
        .pollInterval(Duration.ofMillis(10))
        .until(() -> upstreamRequests.get() > 0);
    // The other pulls join meanwhile. Nothing to await: a manifest pull's join of the shared fetch
    // leaves no trace until the gate opens (blobs show theirs, see the blob test).
    Thread.sleep(300);
    gate.tryEmitValue(true);
  }

  @Test
  void twentyConcurrentColdManifestPullsMakeOneUpstreamRequest() throws Exception {
    ProxyManifestService service =
        new ProxyManifestService(
            PullThroughContext.single(upstreams, scheduler, metrics, properties, Clock.systemUTC()),
            manifests);
    List<CompletableFuture<ManifestResult>> pulls = new ArrayList<>();
    for (int i = 0; i < CLIENTS; i++) {
      pulls.add(
          service
              .get(upstream, name, Reference.parse("v1"), List.of())
              .subscribeOn(Schedulers.parallel())
              .toFuture());
    }
    openGateAfter(manifestGets);
    for (CompletableFuture<ManifestResult> pull : pulls) {
      ManifestResult result = pull.get();
      assertThat(result.manifest().body()).isEqualTo(manifest);
      assertThat(result.manifest().digest()).isEqualTo(Digest.sha256(manifest));
    }
    assertThat(manifestGets).as("upstream manifest requests").hasValue(1);
  }

  @Test
  void twentyConcurrentColdBlobPullsMakeOneUpstreamRequest() throws Exception {
    ProxyBlobService service =
        new ProxyBlobService(
            PullThroughContext.single(upstreams, scheduler, metrics, properties, Clock.systemUTC()),
            blobs);
    Digest digest = Digest.sha256(blob);
    List<BlobSource> sources = new CopyOnWriteArrayList<>();
    List<CompletableFuture<byte[]>> pulls = new ArrayList<>();
    for (int i = 0; i < CLIENTS; i++) {
      pulls.add(
          service
              .get(upstream, name, digest)
              .doOnNext(sources::add)
              .flatMap(this::readAll)
              .subscribeOn(Schedulers.parallel())
              .toFuture());
    }
    // A pull has its source once it started or joined the download; the gate holds the body, so
    // nothing is stored meanwhile and every source is that one download.
    await("every pull has joined the download")
        .atMost(Duration.ofSeconds(10))
        .pollInterval(Duration.ofMillis(10))
        .until(() -> sources.size() == CLIENTS);
    assertThat(sources).allSatisfy(s -> assertThat(s).isInstanceOf(BlobSource.Downloading.class));
    assertThat(sources.stream().map(s -> ((BlobSource.Downloading) s).download()).distinct())
        .hasSize(1);
    gate.tryEmitValue(true);
    for (CompletableFuture<byte[]> pull : pulls) {
      assertThat(pull.get()).isEqualTo(blob);
    }
    assertThat(blobGets).as("upstream blob requests").hasValue(1);
    // Readers end once the bytes are verified; the commit may still be running.
    await()
        .atMost(Duration.ofSeconds(20))
        .untilAsserted(
            () -> {
              assertThat(service.downloadsInFlight()).isZero();
              assertThat(blobs.size(digest)).contains((long) blob.length);
            });
  }

  @Test
  void aPullThatMissedAFillWhichThenEndedServesTheStoredBlobWithoutASecondUpstreamRequest()
      throws Exception {
    gate.tryEmitValue(true);
    Digest digest = Digest.sha256(blob);
    assertThat(
            readAll(
                    new ProxyBlobService(
                            PullThroughContext.single(
                                upstreams, scheduler, metrics, properties, Clock.systemUTC()),
                            blobs)
                        .get(upstream, name, digest)
                        .block(Duration.ofSeconds(30)))
                .block())
        .isEqualTo(blob);
    await()
        .atMost(Duration.ofSeconds(20))
        .untilAsserted(() -> assertThat(blobs.size(digest)).isPresent());
    // The next pull looks while that fill is still running (the store has nothing yet), and the
    // fill stores its blob and leaves the single-flight before the pull joins it.
    BlobStore lateLook = Mockito.spy(blobs);
    Mockito.doReturn(Optional.empty()).doCallRealMethod().when(lateLook).open(digest);
    ProxyBlobService service =
        new ProxyBlobService(
            PullThroughContext.single(upstreams, scheduler, metrics, properties, Clock.systemUTC()),
            lateLook);

    BlobSource source = service.get(upstream, name, digest).block(Duration.ofSeconds(30));
    assertThat(source).isInstanceOf(BlobSource.Stored.class);
    assertThat(readAll(source).block()).isEqualTo(blob);
    assertThat(blobGets).as("upstream blob requests").hasValue(1);
    assertThat(service.downloadsInFlight()).isZero();
  }

  @Test
  void
      aManifestPullThatMissedAFetchWhichThenEndedServesTheStoredManifestWithoutASecondUpstreamRequest() {
    gate.tryEmitValue(true);
    Reference.Tag tag = (Reference.Tag) Reference.parse("v1");
    new ProxyManifestService(
            PullThroughContext.single(upstreams, scheduler, metrics, properties, Clock.systemUTC()),
            manifests)
        .get(upstream, name, tag, List.of())
        .block(Duration.ofSeconds(30));
    assertThat(manifestGets).hasValue(1);
    // The next pull looks (in memory, then on disk) while that fetch is still running, and the
    // fetch stores the manifest and its tag and leaves the single-flight before the pull joins it.
    ManifestStore lateLook = Mockito.spy(manifests);
    Mockito.doReturn(Optional.empty())
        .doCallRealMethod()
        .when(lateLook)
        .cachedTag(upstream.key(), name.value(), tag);
    Mockito.doReturn(Optional.empty())
        .doCallRealMethod()
        .when(lateLook)
        .findTag(upstream.key(), name.value(), tag);
    ProxyManifestService service =
        new ProxyManifestService(
            PullThroughContext.single(upstreams, scheduler, metrics, properties, Clock.systemUTC()),
            lateLook);

    ManifestResult result =
        service.get(upstream, name, tag, List.of()).block(Duration.ofSeconds(30));
    assertThat(result.manifest().body()).isEqualTo(manifest);
    assertThat(manifestGets).as("upstream manifest requests").hasValue(1);
  }

  @Test
  void aManifestPullByDigestThatMissedAFetchWhichThenEndedIsNotFetchedTwice() {
    gate.tryEmitValue(true);
    Digest digest = Digest.sha256(manifest);
    Reference byDigest = Reference.parse(digest.toString());
    new ProxyManifestService(
            PullThroughContext.single(upstreams, scheduler, metrics, properties, Clock.systemUTC()),
            manifests)
        .get(upstream, name, byDigest, List.of())
        .block(Duration.ofSeconds(30));
    assertThat(manifestGets).hasValue(1);
    ManifestStore lateLook = Mockito.spy(manifests);
    Mockito.doReturn(Optional.empty()).doCallRealMethod().when(lateLook).cached(digest);
    Mockito.doReturn(Optional.empty()).when(lateLook).find(digest);
    ProxyManifestService service =
        new ProxyManifestService(
            PullThroughContext.single(upstreams, scheduler, metrics, properties, Clock.systemUTC()),
            lateLook);

    ManifestResult result =
        service.get(upstream, name, byDigest, List.of()).block(Duration.ofSeconds(30));
    assertThat(result.manifest().digest()).isEqualTo(digest);
    assertThat(manifestGets).as("upstream manifest requests").hasValue(1);
  }

  private Mono<byte[]> readAll(BlobSource source) {
    Flux<DataBuffer> body =
        source instanceof BlobSource.Downloading d
            ? d.download().read(0, -1)
            : DataBufferUtils.read(
                ((BlobSource.Stored) source).content().file().orElseThrow(),
                DefaultDataBufferFactory.sharedInstance,
                65536);
    return body.reduce(
            new ByteArrayOutputStream(),
            (out, buffer) -> {
              byte[] bytes = new byte[buffer.readableByteCount()];
              buffer.read(bytes);
              DataBufferUtils.release(buffer);
              out.writeBytes(bytes);
              return out;
            })
        .map(ByteArrayOutputStream::toByteArray)
        .timeout(Duration.ofSeconds(30));
  }
}
