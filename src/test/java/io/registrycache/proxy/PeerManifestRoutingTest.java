package io.registrycache.proxy;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import com.sun.net.httpserver.HttpServer;
import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import io.registrycache.cluster.ClusterMembership;
import io.registrycache.cluster.ClusterProperties;
import io.registrycache.cluster.Member;
import io.registrycache.cluster.PeerMetrics;
import io.registrycache.cluster.PeerProtocol;
import io.registrycache.cluster.PeerToken;
import io.registrycache.cluster.RendezvousHashing;
import io.registrycache.config.RegistryCacheProperties;
import io.registrycache.metrics.CacheMetrics;
import io.registrycache.metrics.CacheMetrics.Result;
import io.registrycache.oci.Digest;
import io.registrycache.oci.MediaTypes;
import io.registrycache.oci.OciErrorCode;
import io.registrycache.oci.OciException;
import io.registrycache.oci.Reference;
import io.registrycache.oci.RepositoryName;
import io.registrycache.storage.BlobStore;
import io.registrycache.storage.FileBlobStore;
import io.registrycache.storage.ManifestStore;
import io.registrycache.storage.StorageLayout;
import io.registrycache.testsupport.ScriptedHttp;
import io.registrycache.testsupport.TestCache.MutableClock;
import io.registrycache.tracing.PullTracing;
import io.registrycache.upstream.Upstream;
import io.registrycache.upstream.UpstreamBlob;
import io.registrycache.upstream.UpstreamClient;
import io.registrycache.upstream.UpstreamException;
import io.registrycache.upstream.UpstreamManifest;
import io.registrycache.upstream.UpstreamManifestHead;
import io.registrycache.upstream.UpstreamTags;
import java.net.URI;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.time.Clock;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicReference;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import reactor.core.publisher.Mono;
import reactor.core.scheduler.Scheduler;
import reactor.core.scheduler.Schedulers;

/**
 * Issue 11, manifest references have an owner replica too: a tag (or digest) owned by another
 * replica is fetched, and revalidated after {@code tag-ttl}, from that owner's peer endpoint (a
 * scripted owner on loopback) instead of the upstream, verified and stored here; a peer's request
 * always goes to the upstream.
 */
class PeerManifestRoutingTest {

  static final String TOKEN = "manifest-routing-token-0123456789";

  @TempDir Path root;
  final List<AutoCloseable> closeables = new ArrayList<>();
  final Upstream upstream =
      new Upstream(
          "local",
          "local.test",
          URI.create("http://127.0.0.1:9"),
          Set.of(),
          false,
          RegistryCacheProperties.upstream(Map.of()));
  final RepositoryName name = RepositoryName.parse("team/app");
  final AtomicInteger upstreamGets = new AtomicInteger();
  final AtomicInteger upstreamHeads = new AtomicInteger();
  final AtomicInteger ownerGets = new AtomicInteger();
  final AtomicReference<String> ownerPath = new AtomicReference<>();

  /** What the owner (and the upstream) have for the tag now; null: no such manifest. */
  volatile byte[] current = manifest(1);

  volatile boolean ownerLies;
  final MutableClock clock = new MutableClock();
  Member self;
  Member owner;
  Scheduler scheduler;
  BlobStore blobs;
  ManifestStore manifests;
  ProxyManifestService service;

  @BeforeEach
  void setUp() throws Exception {
    HttpServer server = ScriptedHttp.server(closeables);
    server.createContext(
        "/",
        exchange -> {
          ownerGets.incrementAndGet();
          ownerPath.set(exchange.getRequestURI().getRawPath());
          byte[] body = current;
          if (body == null) {
            ScriptedHttp.respond(
                exchange,
                404,
                Map.of(PeerProtocol.HEADER, "1"),
                "{\"errors\":[{\"code\":\"MANIFEST_UNKNOWN\"}]}".getBytes(StandardCharsets.UTF_8));
            return;
          }
          String digest = Digest.sha256(body).toString();
          if (ownerLies) {
            body = manifest(99);
          }
          ScriptedHttp.respond(
              exchange,
              200,
              Map.of(
                  PeerProtocol.HEADER,
                  "1",
                  "Content-Type",
                  MediaTypes.OCI_MANIFEST,
                  "Docker-Content-Digest",
                  digest),
              body);
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
            null);
    PeerSource peers =
        new PeerSource(
            new ClusterMembership(cluster, Clock.systemUTC()),
            cluster,
            new PeerToken(cluster),
            new PeerMetrics(new SimpleMeterRegistry()));
    closeables.add(peers::close);
    RegistryCacheProperties properties =
        RegistryCacheProperties.bind(Map.of("registry-cache.storage.path", root.toString()));
    StorageLayout layout = new StorageLayout(properties);
    blobs = new FileBlobStore(layout);
    manifests = new ManifestStore(layout, blobs, properties, Clock.systemUTC());
    scheduler = Schedulers.newBoundedElastic(4, 100, "test-storage");
    service =
        new ProxyManifestService(
            new PullThroughContext(
                upstreamClient(),
                scheduler,
                new CacheMetrics(new SimpleMeterRegistry(), properties),
                properties,
                clock,
                peers,
                PullTracing.off()),
            manifests,
            Prefetcher.none());
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
  void aTagOwnedElsewhereIsFetchedFromItsOwnerVerifiedAndStoredHere() {
    Reference tag = tagOwnedBy(owner);
    ManifestResult cold = get(tag);
    assertThat(cold.result()).isEqualTo(Result.MISS);
    assertThat(cold.manifest().body()).isEqualTo(current);
    assertThat(ownerPath.get()).isEqualTo("/internal/v1/manifests/local/team/app/" + tag);
    assertThat(ownerGets).hasValue(1);
    assertThat(upstreamGets).hasValue(0);
    assertThat(manifests.find(Digest.sha256(current))).isPresent();

    assertThat(get(tag).result()).as("then a hit, asking nobody").isEqualTo(Result.HIT);
    assertThat(ownerGets).hasValue(1);
  }

  @Test
  void aTagOwnedHereComesFromTheUpstream() {
    assertThat(get(tagOwnedBy(self)).result()).isEqualTo(Result.MISS);
    assertThat(upstreamGets).hasValue(1);
    assertThat(ownerGets).hasValue(0);
  }

  @Test
  void aPeersRequestIsNeverForwarded() {
    Reference tag = tagOwnedBy(owner);
    ManifestResult result = service.getForPeer(upstream, name, tag).block(Duration.ofSeconds(10));
    assertThat(result.manifest().body()).isEqualTo(current);
    assertThat(upstreamGets).hasValue(1);
    assertThat(ownerGets).hasValue(0);
  }

  @Test
  void anExpiredTagIsRevalidatedThroughItsOwnerNotWithAnUpstreamHead() {
    Reference tag = tagOwnedBy(owner);
    get(tag);
    clock.advance(Duration.ofHours(1));
    assertThat(get(tag).result()).as("unchanged at the owner").isEqualTo(Result.HIT);
    assertThat(ownerGets).hasValue(2);

    byte[] moved = manifest(2);
    current = moved;
    clock.advance(Duration.ofHours(1));
    ManifestResult afterMove = get(tag);
    assertThat(afterMove.result()).isEqualTo(Result.MISS);
    assertThat(afterMove.manifest().body()).isEqualTo(moved);
    assertThat(ownerGets).hasValue(3);
    assertThat(upstreamHeads).hasValue(0);
    assertThat(upstreamGets).hasValue(0);

    current = null;
    clock.advance(Duration.ofHours(1));
    assertThatThrownBy(() -> get(tag))
        .isInstanceOfSatisfying(UpstreamException.class, e -> assertThat(e.isNotFound()).isTrue());
    assertThat(manifests.findTag("local", name.value(), (Reference.Tag) tag))
        .as("the tag link is dropped")
        .isEmpty();
  }

  @Test
  void anOwnersWrongBytesAreRejectedAndNothingIsStored() {
    Reference tag = tagOwnedBy(owner);
    ownerLies = true;
    assertThatThrownBy(() -> get(tag))
        .isInstanceOfSatisfying(
            OciException.class, e -> assertThat(e.code()).isEqualTo(OciErrorCode.MANIFEST_INVALID));
    assertThat(manifests.find(Digest.sha256(manifest(99)))).isEmpty();
    assertThat(manifests.findTag("local", name.value(), (Reference.Tag) tag)).isEmpty();
  }

  ManifestResult get(Reference reference) {
    return service.get(upstream, name, reference, List.of()).block(Duration.ofSeconds(10));
  }

  /** A tag of team/app owned by {@code member} among self and owner. */
  Reference tagOwnedBy(Member member) {
    for (int i = 0; ; i++) {
      String tag = "v" + i;
      if (RendezvousHashing.owner("local/team/app:" + tag, List.of(self, owner))
          .orElseThrow()
          .equals(member)) {
        return Reference.parse(tag);
      }
    }
  }

  static byte[] manifest(int config) {
    return ("{\"schemaVersion\":2,\"mediaType\":\""
            + MediaTypes.OCI_MANIFEST
            + "\",\"config\":{\"mediaType\":"
            + "\"application/vnd.oci.image.config.v1+json\",\"digest\":\""
            + Digest.sha256(new byte[config])
            + "\",\"size\":"
            + config
            + "},\"layers\":[]}")
        .getBytes(StandardCharsets.UTF_8);
  }

  UpstreamClient upstreamClient() {
    return new UpstreamClient() {
      @Override
      public Mono<UpstreamManifest> getManifest(
          Upstream u, RepositoryName n, Reference r, List<String> a, int max) {
        upstreamGets.incrementAndGet();
        return Mono.just(new UpstreamManifest(current, MediaTypes.OCI_MANIFEST, null));
      }

      @Override
      public Mono<UpstreamManifestHead> headManifest(
          Upstream u, RepositoryName n, Reference r, List<String> a) {
        upstreamHeads.incrementAndGet();
        return Mono.just(
            new UpstreamManifestHead(
                Digest.sha256(current), MediaTypes.OCI_MANIFEST, current.length));
      }

      @Override
      public Mono<UpstreamBlob> getBlob(Upstream u, RepositoryName n, Digest digest) {
        return Mono.error(new AssertionError("no blob expected"));
      }

      @Override
      public Mono<Long> headBlob(Upstream u, RepositoryName n, Digest d) {
        return Mono.error(new AssertionError("no blob expected"));
      }

      @Override
      public Mono<UpstreamTags> listTags(Upstream u, RepositoryName n, Integer size, String last) {
        return Mono.error(new AssertionError("no tag list expected"));
      }
    };
  }
}
