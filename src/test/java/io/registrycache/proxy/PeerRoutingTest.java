package io.registrycache.proxy;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.awaitility.Awaitility.await;

import com.sun.net.httpserver.HttpServer;
import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import io.registrycache.cluster.ClusterMembership;
import io.registrycache.cluster.ClusterProperties;
import io.registrycache.cluster.Member;
import io.registrycache.cluster.PeerMetrics;
import io.registrycache.cluster.PeerToken;
import io.registrycache.cluster.RendezvousHashing;
import io.registrycache.config.RegistryCacheProperties;
import io.registrycache.metrics.CacheMetrics;
import io.registrycache.oci.Digest;
import io.registrycache.oci.Reference;
import io.registrycache.oci.RepositoryName;
import io.registrycache.storage.BlobStore;
import io.registrycache.storage.ContentWriter;
import io.registrycache.storage.FileBlobStore;
import io.registrycache.storage.StorageLayout;
import io.registrycache.testsupport.ScriptedHttp;
import io.registrycache.tracing.PullTracing;
import io.registrycache.upstream.Upstream;
import io.registrycache.upstream.UpstreamBlob;
import io.registrycache.upstream.UpstreamClient;
import io.registrycache.upstream.UpstreamManifest;
import io.registrycache.upstream.UpstreamManifestHead;
import io.registrycache.upstream.UpstreamTags;
import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.OutputStream;
import java.net.URI;
import java.nio.ByteBuffer;
import java.nio.channels.SeekableByteChannel;
import java.nio.file.Path;
import java.time.Clock;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.springframework.core.io.buffer.DataBuffer;
import org.springframework.core.io.buffer.DataBufferUtils;
import org.springframework.core.io.buffer.DefaultDataBufferFactory;
import reactor.core.publisher.Flux;
import reactor.core.publisher.Mono;
import reactor.core.scheduler.Scheduler;
import reactor.core.scheduler.Schedulers;

/**
 * The owner-selection wiring of the blob miss path: a blob owned by another replica is filled from
 * it (and verified and stored here), one owned by this replica and every peer's request from the
 * upstream.
 */
class PeerRoutingTest {

  static final String TOKEN = "routing-test-token-0123456789";

  @TempDir Path root;
  final List<AutoCloseable> closeables = new ArrayList<>();
  RegistryCacheProperties properties;
  final Upstream upstream =
      new Upstream(
          "local",
          "local.test",
          URI.create("http://127.0.0.1:9"),
          Set.of(),
          false,
          RegistryCacheProperties.upstream(Map.of()));
  final RepositoryName name = RepositoryName.parse("team/app");
  final Map<Digest, byte[]> upstreamBlobs = new ConcurrentHashMap<>();
  final AtomicInteger upstreamGets = new AtomicInteger();
  final AtomicInteger ownerGets = new AtomicInteger();
  volatile boolean ownerLies;
  volatile boolean ownerFails;
  final AtomicInteger writersBehindOwner = new AtomicInteger();
  final AtomicInteger ownerGaveUp = new AtomicInteger();
  Member self;
  Member owner;
  Scheduler scheduler;
  BlobStore blobs;
  ProxyBlobService service;

  @BeforeEach
  void setUp() throws Exception {
    HttpServer server = ScriptedHttp.server(closeables);
    server.createContext(
        "/",
        exchange -> {
          ownerGets.incrementAndGet();
          if (ownerFails) {
            ScriptedHttp.respond(exchange, 503, Map.of(), "busy".getBytes());
            return;
          }
          String path = exchange.getRequestURI().getRawPath();
          byte[] bytes =
              upstreamBlobs.get(Digest.parse(path.substring(path.lastIndexOf('/') + 1))).clone();
          if (ownerLies) {
            bytes[0] ^= 1;
          }
          exchange.sendResponseHeaders(200, bytes.length);
          try (OutputStream out = exchange.getResponseBody()) {
            out.write(bytes);
          }
        });
    owner = new Member("127.0.0.1", server.getAddress().getPort());
    self = new Member("127.0.0.1", 1);
    ClusterProperties cluster =
        new ClusterProperties(
            List.of(self.id(), owner.id()),
            null,
            1,
            Duration.ofSeconds(10),
            self.id(),
            TOKEN,
            null,
            Duration.ofSeconds(2),
            Duration.ofSeconds(10),
            Duration.ofSeconds(10),
            null,
            // first-byte-timeout: the default 1 s is missed by this in-process owner on a loaded
            // machine, and the blob then comes from the upstream instead of from the owner
            Duration.ofSeconds(10));
    PeerSource peers =
        new PeerSource(
            new ClusterMembership(cluster, Clock.systemUTC()),
            cluster,
            new PeerToken(cluster),
            new PeerMetrics(new SimpleMeterRegistry()));
    closeables.add(peers::close);
    properties =
        RegistryCacheProperties.bind(Map.of("registry-cache.storage.path", root.toString()));
    blobs =
        new FileBlobStore(new StorageLayout(properties)) {
          @Override
          public ContentWriter newWriter(
              Digest digest, boolean behindOwner, String upstreamKey, String repository)
              throws IOException {
            ContentWriter plain = super.newWriter(digest, false, upstreamKey, repository);
            if (!behindOwner) {
              return plain;
            }
            writersBehindOwner.incrementAndGet();
            return new RecordingWriter(plain);
          }
        };
    scheduler = Schedulers.newBoundedElastic(4, 100, "test-storage");
    service =
        new ProxyBlobService(
            new PullThroughContext(
                upstreamClient(),
                scheduler,
                new CacheMetrics(new SimpleMeterRegistry(), properties),
                properties,
                Clock.systemUTC(),
                peers,
                PullTracing.off()),
            blobs);
  }

  @AfterEach
  void tearDown() throws Exception {
    for (AutoCloseable c : closeables) {
      c.close();
    }
    scheduler.dispose();
    blobs.close();
  }

  @Test
  void aBlobOwnedElsewhereIsFilledFromItsOwnerAndStoredHere() {
    Digest digest = blobOwnedBy(owner);
    assertThat(read(service.get(upstream, name, digest))).isEqualTo(upstreamBlobs.get(digest));
    assertThat(ownerGets).hasValue(1);
    assertThat(upstreamGets).hasValue(0);
    // The reader ends once the bytes are verified; the commit may still be running.
    await()
        .atMost(Duration.ofSeconds(20))
        .untilAsserted(
            () -> assertThat(blobs.size(digest)).contains((long) upstreamBlobs.get(digest).length));
    assertThat(read(service.get(upstream, name, digest)))
        .as("then a hit")
        .isEqualTo(upstreamBlobs.get(digest));
    assertThat(ownerGets).hasValue(1);
    assertThat(writersBehindOwner).as("the owner stores it too").hasValue(1);
    assertThat(ownerGaveUp).hasValue(0);
  }

  @Test
  void whenTheOwnerGivesUpTheWriterIsToldToStoreTheBytesItself() {
    Digest digest = blobOwnedBy(owner);
    ownerFails = true;
    assertThat(read(service.get(upstream, name, digest))).isEqualTo(upstreamBlobs.get(digest));
    assertThat(ownerGets).hasValue(1);
    assertThat(upstreamGets).hasValue(1);
    assertThat(writersBehindOwner).hasValue(1);
    assertThat(ownerGaveUp)
        .as("no owner stores these bytes: a shared store must not wait for its copy")
        .hasValue(1);
    await()
        .atMost(Duration.ofSeconds(20))
        .untilAsserted(
            () -> assertThat(blobs.size(digest)).contains((long) upstreamBlobs.get(digest).length));
  }

  /** A writer behind an owner that records {@link ContentWriter#ownerGaveUp}. */
  final class RecordingWriter implements ContentWriter {
    private final ContentWriter delegate;

    RecordingWriter(ContentWriter delegate) {
      this.delegate = delegate;
    }

    @Override
    public void ownerGaveUp() {
      ownerGaveUp.incrementAndGet();
      delegate.ownerGaveUp();
    }

    @Override
    public SeekableByteChannel openReader() throws IOException {
      return delegate.openReader();
    }

    @Override
    public long verify(long expectedSize) {
      return delegate.verify(expectedSize);
    }

    @Override
    public Digest digest() {
      return delegate.digest();
    }

    @Override
    public long written() {
      return delegate.written();
    }

    @Override
    public void append(ByteBuffer bytes) throws IOException {
      delegate.append(bytes);
    }

    @Override
    public long commit(long expectedSize) throws IOException {
      return delegate.commit(expectedSize);
    }

    @Override
    public void abort() {
      delegate.abort();
    }
  }

  @Test
  void aBlobOwnedHereComesFromTheUpstream() {
    Digest digest = blobOwnedBy(self);
    assertThat(read(service.get(upstream, name, digest))).isEqualTo(upstreamBlobs.get(digest));
    assertThat(upstreamGets).hasValue(1);
    assertThat(ownerGets).hasValue(0);
  }

  @Test
  void aPeersRequestIsNeverForwardedEvenWhenThisReplicaThinksAnotherOwnsTheBlob() {
    Digest digest = blobOwnedBy(owner);
    assertThat(read(service.getForPeer(upstream, name, digest)))
        .isEqualTo(upstreamBlobs.get(digest));
    assertThat(upstreamGets).hasValue(1);
    assertThat(ownerGets).hasValue(0);
  }

  @Test
  void anOwnersWrongBytesAreRejectedAndNothingIsStored() {
    Digest digest = blobOwnedBy(owner);
    ownerLies = true;
    assertThatThrownBy(() -> read(service.get(upstream, name, digest)))
        .hasMessageContaining("digest");
    assertThat(ownerGets).hasValue(1);
    assertThat(upstreamGets).as("the bytes rejected are the owner's").hasValue(0);
    assertThat(blobs.size(digest)).isEmpty();
  }

  /** A new random blob the upstream has, owned by {@code member} among self and owner. */
  Digest blobOwnedBy(Member member) {
    Random random = new Random(upstreamBlobs.size() * 7919L + member.port());
    while (true) {
      byte[] bytes = new byte[100_000 + random.nextInt(50_000)];
      random.nextBytes(bytes);
      Digest digest = Digest.sha256(bytes);
      if (RendezvousHashing.owner(digest.toString(), List.of(self, owner))
          .orElseThrow()
          .equals(member)) {
        upstreamBlobs.put(digest, bytes);
        return digest;
      }
    }
  }

  byte[] read(Mono<BlobSource> source) {
    BlobSource s = source.block(Duration.ofSeconds(20));
    Flux<DataBuffer> body =
        s instanceof BlobSource.Downloading d
            ? d.download().read(0, -1)
            : ((BlobSource.Stored) s)
                .content()
                .read(0, s.size(), DefaultDataBufferFactory.sharedInstance);
    ByteArrayOutputStream out = new ByteArrayOutputStream();
    body.doOnNext(
            buffer -> {
              byte[] bytes = new byte[buffer.readableByteCount()];
              buffer.read(bytes);
              DataBufferUtils.release(buffer);
              out.writeBytes(bytes);
            })
        .blockLast(Duration.ofSeconds(20));
    return out.toByteArray();
  }

  UpstreamClient upstreamClient() {
    return new UpstreamClient() {
      @Override
      public Mono<UpstreamManifest> getManifest(
          Upstream u, RepositoryName n, Reference r, List<String> a, int max) {
        return Mono.error(new AssertionError("no manifest expected"));
      }

      @Override
      public Mono<UpstreamManifestHead> headManifest(
          Upstream u, RepositoryName n, Reference r, List<String> a) {
        return Mono.error(new AssertionError("no manifest expected"));
      }

      @Override
      public Mono<UpstreamBlob> getBlob(Upstream u, RepositoryName n, Digest digest) {
        upstreamGets.incrementAndGet();
        byte[] bytes = upstreamBlobs.get(digest);
        return Mono.just(
            new UpstreamBlob(
                bytes.length,
                Flux.just(DefaultDataBufferFactory.sharedInstance.wrap(bytes.clone()))));
      }

      @Override
      public Mono<Long> headBlob(Upstream u, RepositoryName n, Digest digest) {
        return Mono.error(new AssertionError("no HEAD expected"));
      }

      @Override
      public Mono<UpstreamTags> listTags(Upstream u, RepositoryName n, Integer size, String last) {
        return Mono.error(new AssertionError("no tags expected"));
      }
    };
  }
}
