package io.registrycache.proxy;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import com.sun.net.httpserver.HttpServer;
import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import io.registrycache.cluster.ClusterMembership;
import io.registrycache.cluster.ClusterProperties;
import io.registrycache.cluster.Member;
import io.registrycache.cluster.PeerMetrics;
import io.registrycache.cluster.PeerMetrics.Direction;
import io.registrycache.cluster.PeerMetrics.FallbackReason;
import io.registrycache.cluster.PeerMetrics.Outcome;
import io.registrycache.cluster.PeerMetrics.SuspicionReason;
import io.registrycache.cluster.PeerProtocol;
import io.registrycache.cluster.PeerToken;
import io.registrycache.config.RegistryCacheProperties;
import io.registrycache.oci.Digest;
import io.registrycache.oci.OciErrorCode;
import io.registrycache.oci.OciException;
import io.registrycache.oci.Reference;
import io.registrycache.oci.RepositoryName;
import io.registrycache.testsupport.ScriptedHttp;
import io.registrycache.testsupport.TestCache.MutableClock;
import io.registrycache.upstream.Upstream;
import io.registrycache.upstream.UpstreamBlob;
import io.registrycache.upstream.UpstreamManifest;
import java.io.ByteArrayOutputStream;
import java.io.OutputStream;
import java.net.ServerSocket;
import java.net.URI;
import java.nio.charset.StandardCharsets;
import java.time.Clock;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.Set;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicReference;
import java.util.function.Supplier;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.springframework.core.io.buffer.DataBuffer;
import org.springframework.core.io.buffer.DataBufferUtils;
import org.springframework.core.io.buffer.DefaultDataBufferFactory;
import reactor.core.publisher.Flux;
import reactor.core.publisher.Mono;

/**
 * The non-owner's side of the peer protocol against a scripted owner on loopback: what it sends,
 * and when it falls back to the upstream (availability beats deduplication).
 */
class PeerSourceTest {

  static final String TOKEN = "unit-test-token-0123456789";
  static final byte[] BLOB = new byte[300_000];
  static final Digest DIGEST;
  static final Upstream UPSTREAM =
      new Upstream(
          "local",
          "upstream.test",
          URI.create("http://upstream.test"),
          Set.of(),
          false,
          RegistryCacheProperties.upstream(Map.of()));
  static final RepositoryName NAME = RepositoryName.parse("team/app");

  static {
    new Random(7).nextBytes(BLOB);
    DIGEST = Digest.sha256(BLOB);
  }

  final List<AutoCloseable> closeables = new ArrayList<>();
  final AtomicInteger upstreamFetches = new AtomicInteger();
  final Supplier<Mono<UpstreamBlob>> fromUpstream =
      () -> {
        upstreamFetches.incrementAndGet();
        return Mono.just(new UpstreamBlob(BLOB.length, chunks(BLOB, 65_536)));
      };
  HttpServer owner;
  PeerMetrics metrics;
  PeerSource source;
  Member member;
  ClusterMembership membership;

  @BeforeEach
  void setUp() {
    owner = ScriptedHttp.server(closeables);
    member = new Member("127.0.0.1", owner.getAddress().getPort());
    source = source(member);
  }

  PeerSource source(Member peer) {
    ClusterProperties properties =
        new ClusterProperties(
            List.of(peer.id(), "127.0.0.1:1"),
            null,
            8082,
            Duration.ofSeconds(10),
            "127.0.0.1:1",
            TOKEN,
            null,
            Duration.ofSeconds(2),
            Duration.ofSeconds(5),
            Duration.ofSeconds(10),
            null);
    metrics = new PeerMetrics(new SimpleMeterRegistry());
    membership = new ClusterMembership(properties, Clock.systemUTC());
    PeerSource s = new PeerSource(membership, properties, new PeerToken(properties), metrics);
    closeables.add(s::close);
    return s;
  }

  @AfterEach
  void tearDown() throws Exception {
    for (AutoCloseable c : closeables) {
      c.close();
    }
  }

  @Test
  void theOwnersBytesAreStreamedWithTheTokenAndTheUpstreamIsNotAsked() {
    AtomicReference<String> path = new AtomicReference<>();
    AtomicReference<String> auth = new AtomicReference<>();
    owner.createContext(
        "/",
        exchange -> {
          path.set(exchange.getRequestURI().getRawPath());
          auth.set(exchange.getRequestHeaders().getFirst("Authorization"));
          exchange.getResponseHeaders().add(PeerProtocol.HEADER, "1");
          exchange.sendResponseHeaders(200, BLOB.length);
          try (OutputStream out = exchange.getResponseBody()) {
            out.write(BLOB);
          }
        });
    assertThat(read(fetch())).isEqualTo(BLOB);
    assertThat(path.get()).isEqualTo("/internal/v1/blobs/local/team/app/" + DIGEST);
    assertThat(auth.get()).isEqualTo("Bearer " + TOKEN);
    assertThat(upstreamFetches).hasValue(0);
    assertThat(metrics.requests(Direction.OUT, Outcome.OK)).isEqualTo(1);
  }

  @Test
  void aBodyThatBreaksOffIsCompletedFromTheUpstreamWithoutRepeatingAByte() {
    owner.createContext(
        "/",
        exchange -> {
          exchange.sendResponseHeaders(200, BLOB.length);
          OutputStream out = exchange.getResponseBody();
          out.write(BLOB, 0, 100_001);
          out.flush();
          exchange
              .close(); // the owner dies mid-body: fewer bytes than announced, connection closed
        });
    assertThat(read(fetch())).isEqualTo(BLOB);
    assertThat(upstreamFetches).hasValue(1);
    assertThat(metrics.fallbacks(FallbackReason.BROKEN_BODY)).isEqualTo(1);
  }

  @Test
  void anErrorStatusBeforeTheBodyFallsBackToTheUpstream() {
    owner.createContext(
        "/", exchange -> ScriptedHttp.respond(exchange, 503, Map.of(), "busy".getBytes()));
    assertThat(read(fetch())).isEqualTo(BLOB);
    assertThat(metrics.fallbacks(FallbackReason.ERROR_STATUS)).isEqualTo(1);
    assertThat(metrics.requests(Direction.OUT, Outcome.FAILED)).isEqualTo(1);
    assertThat(membership.suspects()).as("a live owner that answers is not suspected").isEmpty();
  }

  @Test
  void theOwnersNoSuchBlobIsBelievedButA404FromSomethingElseIsNot() {
    AtomicInteger marked = new AtomicInteger(1);
    owner.createContext(
        "/",
        exchange -> {
          if (marked.get() == 1) {
            exchange.getResponseHeaders().add(PeerProtocol.HEADER, "1");
          }
          ScriptedHttp.respond(
              exchange, 404, Map.of(), "{\"errors\":[{\"code\":\"BLOB_UNKNOWN\"}]}".getBytes());
        });
    assertThatThrownBy(() -> read(fetch()))
        .isInstanceOfSatisfying(
            OciException.class, e -> assertThat(e.code()).isEqualTo(OciErrorCode.BLOB_UNKNOWN));
    assertThat(upstreamFetches).hasValue(0);
    assertThat(metrics.requests(Direction.OUT, Outcome.NOT_FOUND)).isEqualTo(1);

    marked.set(0); // e.g. a replica of another version that does not know the path
    assertThat(read(fetch())).isEqualTo(BLOB);
    assertThat(metrics.fallbacks(FallbackReason.ERROR_STATUS)).isEqualTo(1);
  }

  @Test
  void anOwnerNobodyListensOnIsUnreachable() throws Exception {
    int closedPort;
    try (ServerSocket socket = new ServerSocket(0)) {
      closedPort = socket.getLocalPort();
    }
    PeerSource toNowhere = source(new Member("127.0.0.1", closedPort));
    assertThat(
            read(
                toNowhere.fetch(
                    new Member("127.0.0.1", closedPort), UPSTREAM, NAME, DIGEST, fromUpstream)))
        .isEqualTo(BLOB);
    assertThat(metrics.fallbacks(FallbackReason.UNREACHABLE)).isEqualTo(1);
    assertThat(membership.suspects())
        .as("left out of ownership for suspect-for")
        .containsExactly(new Member("127.0.0.1", closedPort));
    assertThat(metrics.suspicions(SuspicionReason.UNREACHABLE)).isEqualTo(1);
  }

  /**
   * An owner that accepts connections and reads requests but answers nothing (a stopped process;
   * here its handlers wait) until it is resumed. Its peer settings: {@code first-byte-timeout} 500
   * ms, {@code read-timeout} 10 minutes (so a miss that falls back in time did not wait for it),
   * {@code suspect-for} 10 s on {@code clock}; it is the only member, this replica not one.
   */
  PeerSource sourceOfTheOnlyOwner(Member peer, Clock clock) {
    ClusterProperties properties =
        new ClusterProperties(
            List.of(peer.id()),
            null,
            8082,
            Duration.ofSeconds(10),
            null,
            TOKEN,
            null,
            Duration.ofSeconds(2),
            Duration.ofMinutes(10),
            Duration.ofSeconds(10),
            null,
            Duration.ofMillis(500));
    metrics = new PeerMetrics(new SimpleMeterRegistry());
    membership = new ClusterMembership(properties, clock);
    PeerSource s = new PeerSource(membership, properties, new PeerToken(properties), metrics);
    closeables.add(s::close);
    return s;
  }

  @Test
  void aHungOwnerIsSuspectedAfterTheFirstByteBudgetAndUsedAgainOnceItAnswers() {
    CountDownLatch resumed = new CountDownLatch(1);
    closeables.add(0, resumed::countDown); // before the server stops: its handlers return
    AtomicInteger blobRequests = new AtomicInteger();
    AtomicInteger pings = new AtomicInteger();
    owner.createContext(
        "/",
        exchange -> {
          if (exchange.getRequestURI().getPath().equals(PeerProtocol.PING)) {
            pings.incrementAndGet();
          } else {
            blobRequests.incrementAndGet();
          }
          try {
            resumed.await();
          } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            return;
          }
          if (exchange.getRequestURI().getPath().equals(PeerProtocol.PING)) {
            ScriptedHttp.respond(exchange, 204, Map.of(PeerProtocol.HEADER, "1"), new byte[0]);
            return;
          }
          exchange.getResponseHeaders().add(PeerProtocol.HEADER, "1");
          exchange.sendResponseHeaders(200, BLOB.length);
          try (OutputStream out = exchange.getResponseBody()) {
            out.write(BLOB);
          }
        });
    MutableClock clock = new MutableClock();
    PeerSource hung = sourceOfTheOnlyOwner(member, clock);
    assertThat(hung.ownerElsewhere(DIGEST)).contains(member);

    // The first miss: no headers within first-byte-timeout, no answer to the ping either. It is
    // served from the upstream well within read-timeout (10 minutes; readFlux gives it 20 s).
    assertThat(read(hung.fetch(member, UPSTREAM, NAME, DIGEST, fromUpstream))).isEqualTo(BLOB);
    assertThat(upstreamFetches).hasValue(1);
    assertThat(blobRequests).hasValue(1);
    assertThat(pings).as("the owner was asked whether it is alive").hasValue(1);
    assertThat(membership.suspects()).containsExactly(member);
    assertThat(metrics.suspicions(SuspicionReason.SILENT)).isEqualTo(1);
    assertThat(metrics.suspicions(SuspicionReason.UNREACHABLE)).isZero();
    assertThat(metrics.fallbacks(FallbackReason.UNREACHABLE)).isEqualTo(1);

    // The next misses do not ask it while it is a suspect (here no other member: the upstream).
    assertThat(hung.ownerElsewhere(DIGEST)).isEmpty();
    assertThat(hung.manifestOwnerElsewhere(UPSTREAM, NAME, Reference.parse("v1"))).isEmpty();
    assertThat(blobRequests).hasValue(1);

    // It comes back (SIGCONT): once suspect-for is over it owns its blobs again and serves them.
    resumed.countDown();
    clock.advance(Duration.ofSeconds(10));
    assertThat(hung.ownerElsewhere(DIGEST)).contains(member);
    assertThat(read(hung.fetch(member, UPSTREAM, NAME, DIGEST, fromUpstream))).isEqualTo(BLOB);
    assertThat(upstreamFetches).as("served by the owner").hasValue(1);
    assertThat(metrics.requests(Direction.OUT, Outcome.OK)).isEqualTo(1);
    assertThat(metrics.suspicions(SuspicionReason.SILENT)).isEqualTo(1);
  }

  @Test
  void aBusyOwnerThatAnswersThePingIsWaitedForNotSuspected() {
    owner.createContext(
        "/",
        exchange -> {
          if (exchange.getRequestURI().getPath().equals(PeerProtocol.PING)) {
            ScriptedHttp.respond(exchange, 204, Map.of(PeerProtocol.HEADER, "1"), new byte[0]);
            return;
          }
          try {
            Thread.sleep(1_500); // e.g. waiting for its own upstream: three first-byte budgets
          } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            return;
          }
          exchange.getResponseHeaders().add(PeerProtocol.HEADER, "1");
          exchange.sendResponseHeaders(200, BLOB.length);
          try (OutputStream out = exchange.getResponseBody()) {
            out.write(BLOB);
          }
        });
    PeerSource busy = sourceOfTheOnlyOwner(member, Clock.systemUTC());
    assertThat(read(busy.fetch(member, UPSTREAM, NAME, DIGEST, fromUpstream))).isEqualTo(BLOB);
    assertThat(upstreamFetches).hasValue(0);
    assertThat(membership.suspects()).isEmpty();
    assertThat(metrics.suspicions(SuspicionReason.SILENT)).isZero();
    assertThat(metrics.requests(Direction.OUT, Outcome.OK)).isEqualTo(1);
  }

  @Test
  void aHungOwnersManifestFallsBackToo() {
    CountDownLatch resumed = new CountDownLatch(1);
    closeables.add(0, resumed::countDown);
    owner.createContext(
        "/",
        exchange -> {
          try {
            resumed.await();
          } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
          }
          exchange.close();
        });
    byte[] manifest = "{\"schemaVersion\":2}".getBytes(StandardCharsets.UTF_8);
    PeerSource hung = sourceOfTheOnlyOwner(member, Clock.systemUTC());
    UpstreamManifest fetched =
        hung.fetchManifest(
                member,
                UPSTREAM,
                NAME,
                Reference.parse("v1"),
                4096,
                () ->
                    Mono.just(
                        new UpstreamManifest(
                            manifest, "application/vnd.oci.image.manifest.v1+json", null)))
            .block(Duration.ofSeconds(20));
    assertThat(fetched.body()).isEqualTo(manifest);
    assertThat(membership.suspects()).containsExactly(member);
    assertThat(metrics.suspicions(SuspicionReason.SILENT)).isEqualTo(1);
  }

  @Test
  void anOwnersManifestComesWithItsMediaTypeAndDigestAndAnUnusableAnswerFallsBack() {
    byte[] manifest = "{\"schemaVersion\":2}".getBytes(StandardCharsets.UTF_8);
    AtomicReference<String> digestHeader =
        new AtomicReference<>(Digest.sha256(manifest).toString());
    AtomicReference<String> path = new AtomicReference<>();
    owner.createContext(
        "/",
        exchange -> {
          path.set(exchange.getRequestURI().getRawPath());
          ScriptedHttp.respond(
              exchange,
              200,
              Map.of(
                  PeerProtocol.HEADER,
                  "1",
                  "Content-Type",
                  "application/vnd.oci.image.manifest.v1+json",
                  "Docker-Content-Digest",
                  digestHeader.get()),
              manifest);
        });
    AtomicInteger manifestFallbacks = new AtomicInteger();
    Supplier<Mono<UpstreamManifest>> upstreamManifest =
        () -> {
          manifestFallbacks.incrementAndGet();
          return Mono.just(
              new UpstreamManifest(manifest, "application/vnd.oci.image.manifest.v1+json", null));
        };
    Reference tag = Reference.parse("v1");

    UpstreamManifest fromOwner =
        source
            .fetchManifest(member, UPSTREAM, NAME, tag, 4096, upstreamManifest)
            .block(Duration.ofSeconds(10));
    assertThat(fromOwner.body()).isEqualTo(manifest);
    assertThat(fromOwner.mediaType()).isEqualTo("application/vnd.oci.image.manifest.v1+json");
    assertThat(fromOwner.upstreamDigest()).isEqualTo(Digest.sha256(manifest));
    assertThat(path.get()).isEqualTo("/internal/v1/manifests/local/team/app/v1");
    assertThat(manifestFallbacks).hasValue(0);

    digestHeader.set("not-a-digest");
    source
        .fetchManifest(member, UPSTREAM, NAME, tag, 4096, upstreamManifest)
        .block(Duration.ofSeconds(10));
    assertThat(manifestFallbacks)
        .as("a malformed digest header is the owner's fault, not the client's")
        .hasValue(1);

    digestHeader.set(Digest.sha256(manifest).toString());
    source
        .fetchManifest(member, UPSTREAM, NAME, tag, 8, upstreamManifest)
        .block(Duration.ofSeconds(10));
    assertThat(manifestFallbacks).as("more than max-size-bytes").hasValue(2);
    assertThat(metrics.fallbacks(FallbackReason.UNREACHABLE)).isEqualTo(2);
  }

  @Test
  void skipDropsExactlyTheBytesAlreadyReceived() {
    for (long skip : new long[] {0, 1, 65_535, 65_536, 65_537, BLOB.length - 1, BLOB.length}) {
      byte[] rest = readFlux(PeerSource.skip(chunks(BLOB, 65_536), skip));
      assertThat(rest)
          .as("skip %d", skip)
          .isEqualTo(Arrays.copyOfRange(BLOB, (int) skip, BLOB.length));
    }
  }

  Mono<UpstreamBlob> fetch() {
    return source.fetch(member, UPSTREAM, NAME, DIGEST, fromUpstream);
  }

  static byte[] read(Mono<UpstreamBlob> blob) {
    return readFlux(blob.flatMapMany(UpstreamBlob::body));
  }

  /**
   * Every buffer's bytes in order (buffers of the owner and of the upstream are of different
   * kinds).
   */
  static byte[] readFlux(Flux<DataBuffer> body) {
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

  static Flux<DataBuffer> chunks(byte[] bytes, int size) {
    return Flux.range(0, (bytes.length + size - 1) / size)
        .map(
            i ->
                DefaultDataBufferFactory.sharedInstance.wrap(
                    Arrays.copyOfRange(bytes, i * size, Math.min(bytes.length, (i + 1) * size))));
  }
}
