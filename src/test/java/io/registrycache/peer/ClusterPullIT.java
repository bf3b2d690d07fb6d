package io.registrycache.peer;

import static org.assertj.core.api.Assertions.assertThat;

import io.netty.util.concurrent.EventExecutor;
import io.registrycache.cluster.ClusterMembership;
import io.registrycache.cluster.Member;
import io.registrycache.cluster.PeerMetrics;
import io.registrycache.cluster.PeerMetrics.Direction;
import io.registrycache.cluster.PeerMetrics.FallbackReason;
import io.registrycache.cluster.PeerMetrics.Outcome;
import io.registrycache.cluster.PeerMetrics.SuspicionReason;
import io.registrycache.cluster.RendezvousHashing;
import io.registrycache.testsupport.CacheClient;
import io.registrycache.testsupport.CacheProperties;
import io.registrycache.testsupport.FreePorts;
import io.registrycache.testsupport.ManualCache;
import io.registrycache.testsupport.Sha256;
import io.registrycache.testsupport.TestFiles;
import io.registrycache.testsupport.TestImages;
import io.registrycache.testsupport.TestImages.Blob;
import io.registrycache.testsupport.TestImages.Image;
import io.registrycache.testsupport.UpstreamRegistryContainer;
import java.io.IOException;
import java.net.ConnectException;
import java.net.Inet4Address;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.NetworkInterface;
import java.net.Socket;
import java.net.SocketException;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.TimeUnit;
import java.util.stream.Collectors;
import org.assertj.core.api.Assertions;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.MethodOrderer;
import org.junit.jupiter.api.Order;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestMethodOrder;
import reactor.netty.resources.LoopResources;

/**
 * Issue 11, one upstream fetch per blob across replicas: three replicas of the real service in this
 * JVM (own storage, random pull ports, a static peers list naming each other's peer ports) in front
 * of one real registry:2, whose log counts the upstream requests.
 */
@TestMethodOrder(MethodOrderer.OrderAnnotation.class)
class ClusterPullIT {

  static final String TOKEN = "cluster-it-token-" + TestImages.RUN_ID + "-0123456789";
  static final int REPLICAS = 3;

  static final UpstreamRegistryContainer upstream = UpstreamRegistryContainer.started();
  static final List<ManualCache> replicas = new ArrayList<>();
  static final List<Member> members = new ArrayList<>();

  @BeforeAll
  static void startReplicas() throws IOException {
    List<Integer> ports = FreePorts.take(REPLICAS);
    ports.forEach(p -> members.add(new Member("127.0.0.1", p)));
    String peers = members.stream().map(Member::id).collect(Collectors.joining(","));
    for (int i = 0; i < REPLICAS; i++) {
      replicas.add(
          ManualCache.start(
              CacheProperties.cache(TestFiles.tempDirectory("registry-cache-cluster-" + i + "-"))
                  .localUpstream(upstream::baseUrl)
                  .set("registry-cache.cluster.peers", peers)
                  .set("registry-cache.cluster.peer-port", ports.get(i))
                  .set("registry-cache.cluster.peer-address", "127.0.0.1")
                  .set("registry-cache.cluster.self", members.get(i).id())
                  .set("registry-cache.cluster.token", TOKEN)));
    }
  }

  @AfterAll
  static void stopReplicas() {
    replicas.forEach(ManualCache::close);
  }

  @Test
  @Order(1)
  void anImagePulledThroughEveryReplicaInTurnIsFetchedFromTheUpstreamOncePerBlob() {
    Image image = upstream.pusher().push(imageOwnedByEveryReplica("turns", 2));
    for (ManualCache replica : replicas) {
      replica.client().pullAndVerify(image);
    }
    assertOneUpstreamGetPerBlob(image);
    assertOneUpstreamGetOfTheManifest(image);
    long asked = 0;
    for (ManualCache replica : replicas) {
      asked += metrics(replica).requests(Direction.OUT, Outcome.OK);
    }
    // Each replica asks the owner for the blobs it does not own: (n - 1) * blobs in all.
    assertThat(asked).isGreaterThanOrEqualTo((long) (REPLICAS - 1) * image.blobs().size());
    assertNoFallbacks();
  }

  @Test
  @Order(2)
  void anImagePulledThroughEveryReplicaAtOnceIsFetchedFromTheUpstreamOncePerBlob()
      throws Exception {
    Image image = upstream.pusher().push(imageOwnedByEveryReplica("together", 2));
    ExecutorService pool = Executors.newFixedThreadPool(REPLICAS * 2);
    try {
      CountDownLatch go = new CountDownLatch(1);
      List<CompletableFuture<Void>> pulls = new ArrayList<>();
      for (int round = 0; round < 2; round++) {
        for (ManualCache replica : replicas) {
          pulls.add(
              CompletableFuture.runAsync(
                  () -> {
                    await(go);
                    replica.client().withTimeout(Duration.ofSeconds(120)).pullAndVerify(image);
                  },
                  pool));
        }
      }
      go.countDown();
      CompletableFuture.allOf(pulls.toArray(CompletableFuture[]::new)).get(180, TimeUnit.SECONDS);
    } finally {
      pool.shutdownNow();
    }
    assertOneUpstreamGetPerBlob(image);
    assertOneUpstreamGetOfTheManifest(image);
    assertNoFallbacks();
  }

  @Test
  @Order(3)
  void thePeerPortListensOnlyOnItsPeerAddress() throws Exception {
    int peerPort = members.get(0).port();
    InetAddress other =
        Collections.list(NetworkInterface.getNetworkInterfaces()).stream()
            .filter(
                i -> {
                  try {
                    return i.isUp() && !i.isLoopback();
                  } catch (SocketException e) {
                    return false;
                  }
                })
            .flatMap(i -> Collections.list(i.getInetAddresses()).stream())
            .filter(a -> a instanceof Inet4Address)
            .findFirst()
            .orElse(null);
    Assumptions.assumeTrue(other != null, "no non-loopback IPv4 address on this machine");
    try (Socket loopback = new Socket()) {
      loopback.connect(new InetSocketAddress("127.0.0.1", peerPort), 5_000);
      assertThat(loopback.isConnected()).isTrue();
    }
    try (Socket elsewhere = new Socket()) {
      Assertions.assertThatThrownBy(
              () -> elsewhere.connect(new InetSocketAddress(other, peerPort), 5_000))
          .as("the peer port on %s, with peer-address 127.0.0.1", other)
          .isInstanceOf(ConnectException.class);
    }
  }

  @Test
  @Order(3)
  void thePeerPortAnswersOnlyWithTheToken() throws Exception {
    Image image =
        upstream.pusher().push(TestImages.smallOci(TestImages.uniqueRepository("peer-auth"), "v1"));
    Blob blob = image.layers().get(0);
    String path = "/internal/v1/blobs/local/" + image.repository() + "/" + blob.digest();
    ManualCache first = replicas.get(0);
    int peerPort = members.get(0).port();
    long refusedBefore = metrics(first).requests(Direction.IN, Outcome.UNAUTHORIZED);

    assertThat(peerGet(peerPort, path, null).statusCode()).isEqualTo(401);
    assertThat(peerGet(peerPort, path, "Bearer wrong-token-0123456789abcdef").statusCode())
        .isEqualTo(401);
    assertThat(peerGet(peerPort, path, "Basic " + TOKEN).statusCode()).isEqualTo(401);
    assertThat(peerGet(peerPort, "/v2/", null).statusCode())
        .as("nothing but 401 without the token")
        .isEqualTo(401);
    assertThat(metrics(first).requests(Direction.IN, Outcome.UNAUTHORIZED))
        .isEqualTo(refusedBefore + 4);
    upstream.syncLogs();
    assertThat(
            upstream.countRequests("GET", "/v2/" + image.repository() + "/blobs/" + blob.digest()))
        .isZero();

    HttpResponse<byte[]> ok = peerGet(peerPort, path, "Bearer " + TOKEN);
    assertThat(ok.statusCode()).isEqualTo(200);
    assertThat(Sha256.digest(ok.body())).isEqualTo(blob.digest());
    assertThat(ok.headers().firstValue("Registry-Cache-Peer")).contains("1");
    HttpResponse<byte[]> missing =
        peerGet(
            peerPort,
            "/internal/v1/blobs/local/" + image.repository() + "/" + TestImages.unknownDigest(),
            "Bearer " + TOKEN);
    assertThat(missing.statusCode()).isEqualTo(404);
    assertThat(CacheClient.errorCode(missing)).isEqualTo("BLOB_UNKNOWN");

    HttpResponse<byte[]> manifest =
        peerGet(
            peerPort,
            "/internal/v1/manifests/local/" + image.repository() + "/" + image.tag(),
            "Bearer " + TOKEN);
    assertThat(manifest.statusCode()).isEqualTo(200);
    assertThat(manifest.body()).isEqualTo(image.manifest().bytes());
    assertThat(manifest.headers().firstValue("Docker-Content-Digest"))
        .contains(Sha256.digest(image.manifest().bytes()));
    assertThat(manifest.headers().firstValue("Content-Type"))
        .contains(image.manifest().mediaType());
    HttpResponse<byte[]> noTag =
        peerGet(
            peerPort,
            "/internal/v1/manifests/local/" + image.repository() + "/no-such-tag",
            "Bearer " + TOKEN);
    assertThat(noTag.statusCode()).isEqualTo(404);
    assertThat(noTag.headers().firstValue("Registry-Cache-Peer")).contains("1");
    assertThat(CacheClient.errorCode(noTag)).isEqualTo("MANIFEST_UNKNOWN");
    assertThat(
            peerGet(peerPort, "/internal/v1/manifests/local/" + image.repository() + "/v1", null)
                .statusCode())
        .isEqualTo(401);

    HttpResponse<byte[]> ping = peerGet(peerPort, "/internal/v1/ping", "Bearer " + TOKEN);
    assertThat(ping.statusCode()).isEqualTo(204);
    assertThat(ping.headers().firstValue("Registry-Cache-Peer")).contains("1");

    // The peer endpoint is not on the pull port.
    assertThat(first.client().get(path, "Authorization", "Bearer " + TOKEN).statusCode())
        .isEqualTo(404);
  }

  @Test
  @Order(4)
  void withTheOwnerGoneTheOtherReplicasStillServeEveryBlobFromTheUpstream() {
    Image image = upstream.pusher().push(imageOwnedByEveryReplica("owner-gone", 1));
    int gone = REPLICAS - 1;
    replicas.get(gone).close();
    Map<String, Member> owners = owners(image);
    List<Blob> orphaned =
        image.blobs().stream()
            .filter(b -> owners.get(b.digest()).equals(members.get(gone)))
            .toList();
    assertThat(orphaned).isNotEmpty();

    ManualCache survivor = replicas.get(0);
    long before = metrics(survivor).fallbacks(FallbackReason.UNREACHABLE);
    survivor.client().pullAndVerify(image);
    // The first refused connection makes the gone replica a suspect: its other blobs go to the
    // next owner without another attempt (cluster.suspect-for).
    assertThat(metrics(survivor).fallbacks(FallbackReason.UNREACHABLE) - before)
        .as("blobs owned by the stopped replica, fetched from the upstream by the survivor")
        .isBetween(1L, (long) orphaned.size());
    assertThat(survivor.context().getBean(ClusterMembership.class).suspects())
        .containsExactly(members.get(gone));
    assertOneUpstreamGetPerBlob(image);

    // A second survivor pays at worst one more upstream fetch per orphaned blob, and never fails.
    replicas.get(1).client().pullAndVerify(image);
    upstream.syncLogs();
    for (Blob blob : image.blobs()) {
      long gets =
          upstream.countRequests("GET", "/v2/" + image.repository() + "/blobs/" + blob.digest());
      if (orphaned.contains(blob)) {
        assertThat(gets).as("upstream GETs of orphaned %s", blob.digest()).isBetween(1L, 2L);
      } else {
        assertThat(gets).as("upstream GETs of %s", blob.digest()).isEqualTo(1);
      }
    }
  }

  @Test
  @Order(5)
  void aHungOwnerCostsAMissTheFirstByteBudgetNotTheReadTimeout() {
    // Replica 1 plays a stopped process: every event loop of its peer port (the one accepting and
    // the ones serving) is held, so its kernel still accepts connections and nothing answers.
    Image image = upstream.pusher().push(imageOwnedByEveryReplica("hung-owner", 1));
    int hung = 1;
    ManualCache asker = replicas.get(0);
    Map<String, Member> owners = owners(image);
    assertThat(image.blobs().stream().filter(b -> owners.get(b.digest()).equals(members.get(hung))))
        .isNotEmpty();
    long silentBefore = metrics(asker).suspicions(SuspicionReason.SILENT);
    CountDownLatch resume = new CountDownLatch(1);
    LoopResources loops = replicas.get(hung).context().getBean(PeerServer.class).loops();
    List<EventExecutor> held = new ArrayList<>();
    loops.onServerSelect(true).forEach(held::add);
    loops.onServer(true).forEach(held::add);
    CountDownLatch allHeld = new CountDownLatch(held.size());
    held.forEach(
        loop ->
            loop.execute(
                () -> {
                  allHeld.countDown();
                  await(resume);
                }));
    try {
      await(allHeld);
      // Each request of the pull may take 30 s, half of read-timeout (60 s): a miss that waited for
      // the hung owner's headers until read-timeout fails it.
      asker.client().withTimeout(Duration.ofSeconds(30)).pullAndVerify(image);
      assertThat(metrics(asker).suspicions(SuspicionReason.SILENT) - silentBefore)
          .as("the hung owner, suspected once: the misses after the first do not ask it")
          .isEqualTo(1);
      assertThat(asker.context().getBean(ClusterMembership.class).suspects())
          .contains(members.get(hung));
    } finally {
      resume.countDown();
    }
    // Resumed, it serves again: the image through it, every digest checked.
    replicas.get(hung).client().withTimeout(Duration.ofSeconds(30)).pullAndVerify(image);
  }

  // ---------------------------------------------------------------------------------------------

  /** An image whose layers include at least {@code each} owned by every replica. */
  static Image imageOwnedByEveryReplica(String purpose, int each) {
    String repository = TestImages.uniqueRepository("cluster-" + purpose);
    List<byte[]> layers = new ArrayList<>();
    Map<Member, Integer> owned = new HashMap<>();
    for (long seed = 0;
        owned.size() < REPLICAS || owned.values().stream().anyMatch(n -> n < each);
        seed++) {
      byte[] layer =
          TestImages.randomBytes(
              256 * 1024 + (int) (seed * 4099), repository.hashCode() * 31L + seed);
      layers.add(layer);
      owned.merge(
          RendezvousHashing.owner(Sha256.digest(layer), members).orElseThrow(), 1, Integer::sum);
    }
    return TestImages.withLayers(repository, "v1", layers.toArray(byte[][]::new));
  }

  static Map<String, Member> owners(Image image) {
    Map<String, Member> owners = new HashMap<>();
    image
        .blobs()
        .forEach(
            b ->
                owners.put(b.digest(), RendezvousHashing.owner(b.digest(), members).orElseThrow()));
    return owners;
  }

  static void assertOneUpstreamGetPerBlob(Image image) {
    upstream.syncLogs();
    System.out.printf(
        "ClusterPullIT %s: %d blobs, %d replicas, upstream blob GETs %s%n",
        image.repository(),
        image.blobs().size(),
        REPLICAS,
        image.blobs().stream()
            .map(
                b ->
                    upstream.countRequests(
                        "GET", "/v2/" + image.repository() + "/blobs/" + b.digest()))
            .toList());
    for (Blob blob : image.blobs()) {
      assertThat(
              upstream.countRequests(
                  "GET", "/v2/" + image.repository() + "/blobs/" + blob.digest()))
          .as("upstream GETs of blob %s (%d bytes)", blob.digest(), blob.size())
          .isEqualTo(1);
    }
  }

  /** The tag's owner fetched it for every replica (manifest references have owners too). */
  static void assertOneUpstreamGetOfTheManifest(Image image) {
    upstream.syncLogs();
    assertThat(
            upstream.countRequests(
                "GET", "/v2/" + image.repository() + "/manifests/" + image.tag()))
        .as("upstream GETs of %s:%s", image.repository(), image.tag())
        .isEqualTo(1);
  }

  static void assertNoFallbacks() {
    for (ManualCache replica : replicas) {
      for (FallbackReason reason : FallbackReason.values()) {
        assertThat(metrics(replica).fallbacks(reason)).as("fallbacks %s", reason).isZero();
      }
    }
  }

  static PeerMetrics metrics(ManualCache replica) {
    return replica.context().getBean(PeerMetrics.class);
  }

  static HttpResponse<byte[]> peerGet(int port, String path, String authorization)
      throws Exception {
    HttpRequest.Builder request =
        HttpRequest.newBuilder(URI.create("http://127.0.0.1:" + port + path))
            .timeout(Duration.ofSeconds(30));
    if (authorization != null) {
      request.header("Authorization", authorization);
    }
    return HttpClient.newHttpClient()
        .send(request.build(), HttpResponse.BodyHandlers.ofByteArray());
  }

  static void await(CountDownLatch latch) {
    try {
      latch.await();
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new IllegalStateException(e);
    }
  }
}
