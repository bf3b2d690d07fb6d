package io.registrycache.proxy;

import io.netty.channel.ChannelOption;
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
import io.registrycache.oci.Digest;
import io.registrycache.oci.OciErrorCode;
import io.registrycache.oci.OciException;
import io.registrycache.oci.Reference;
import io.registrycache.oci.RepositoryName;
import io.registrycache.tracing.PullSpan;
import io.registrycache.upstream.Upstream;
import io.registrycache.upstream.UpstreamBlob;
import io.registrycache.upstream.UpstreamException;
import io.registrycache.upstream.UpstreamManifest;
import jakarta.annotation.PreDestroy;
import java.net.ConnectException;
import java.net.URI;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.Optional;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicLong;
import java.util.function.Supplier;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import org.springframework.beans.factory.ObjectProvider;
import org.springframework.beans.factory.annotation.Autowired;
import org.springframework.core.io.buffer.DataBuffer;
import org.springframework.core.io.buffer.DataBufferUtils;
import org.springframework.http.HttpHeaders;
import org.springframework.http.HttpStatus;
import org.springframework.http.ResponseEntity;
import org.springframework.http.client.reactive.ReactorClientHttpConnector;
import org.springframework.stereotype.Component;
import org.springframework.web.reactive.function.client.WebClient;
import org.springframework.web.util.UriUtils;
import reactor.core.publisher.Flux;
import reactor.core.publisher.Mono;
import reactor.netty.http.client.HttpClient;
import reactor.netty.resources.ConnectionProvider;
import reactor.netty.resources.LoopResources;

/**
 * The blob miss path's hook for replicas (issue 11): a blob whose owner ({@link
 * ClusterMembership#ownerElsewhere}) is another replica is fetched from that owner's peer endpoint
 * ({@link PeerProtocol}) instead of the upstream, into the same {@link BlobDownload}, so it is
 * verified and stored here as any fill; the owner's own pull-through (single-flight, content scope)
 * makes the one upstream fetch.
 *
 * <p>Availability beats deduplication: when the owner cannot be reached, does not answer within
 * {@code cluster.read-timeout}, or answers an error status other than "no such blob", the blob is
 * fetched from the upstream here ({@code registry_cache_peer_fallbacks_total}); when the owner's
 * body breaks off, the rest comes from a fresh upstream fetch whose first bytes (those already
 * received) are skipped. So a replica killed or started costs at worst a duplicate upstream fetch,
 * never a failed pull. An owner whose connection was refused or timed out is suspected ({@link
 * ClusterMembership#suspect}): for {@code cluster.suspect-for} its blobs get the next owner.
 *
 * <p>A hung owner (a stopped process: its kernel still accepts connections, nothing answers) is
 * told from a busy one (whose answer waits for its own upstream or a fill permit) by a probe: when
 * the owner's response headers have not come within {@code cluster.first-byte-timeout} of the
 * request's start, {@link PeerProtocol#PING} is sent on another connection; an owner that answers
 * it, whatever the status, is waited for (up to {@code read-timeout}), one that does not within
 * {@code first-byte-timeout} more is suspected and the request given up here (the upstream asked
 * instead). So a hung owner costs one miss at most twice {@code first-byte-timeout}, and the misses
 * after it none while it is a suspect. A body that stalls after the headers breaks off after {@code
 * read-timeout} as before and is resumed from the upstream. Independent of the store: it only
 * supplies the bytes of a fill.
 */
@Component
public class PeerSource {

  private static final Logger log = LoggerFactory.getLogger(PeerSource.class);

  private final ClusterMembership membership;
  private final PeerToken token;
  private final PeerMetrics metrics;
  private final LoopResources loops;
  private final ConnectionProvider pool;
  private final WebClient client;

  /** For pings only: a new connection each, never one queued behind the pool's requests. */
  private final WebClient pingClient;

  private final Duration firstByteTimeout;

  /**
   * A single replica (no cluster configured, so no cluster beans): every blob from the upstream.
   */
  @Autowired
  public PeerSource(
      ObjectProvider<ClusterMembership> membership,
      ClusterProperties properties,
      ObjectProvider<PeerToken> token,
      ObjectProvider<PeerMetrics> metrics) {
    this(membership.getIfAvailable(), properties, token.getIfAvailable(), metrics.getIfAvailable());
  }

  /**
   * @param membership the cluster, or {@code null} for a single replica
   */
  public PeerSource(
      ClusterMembership membership,
      ClusterProperties properties,
      PeerToken token,
      PeerMetrics metrics) {
    this.membership = membership;
    this.token = token;
    this.metrics = metrics;
    this.firstByteTimeout = properties.firstByteTimeout();
    if (membership != null && membership.enabled()) {
      this.loops = LoopResources.create("peer-client", 2, true);
      this.pool =
          ConnectionProvider.builder("peer-client")
              .maxConnections(256)
              .pendingAcquireMaxCount(4096)
              .maxIdleTime(Duration.ofSeconds(30))
              .build();
      HttpClient http =
          HttpClient.create(pool)
              .runOn(loops)
              .option(
                  ChannelOption.CONNECT_TIMEOUT_MILLIS,
                  (int) properties.connectTimeout().toMillis())
              .responseTimeout(properties.readTimeout())
              .followRedirect(false)
              .compress(false);
      this.client =
          WebClient.builder().clientConnector(new ReactorClientHttpConnector(http)).build();
      HttpClient ping =
          HttpClient.create(ConnectionProvider.newConnection())
              .runOn(loops)
              .option(
                  ChannelOption.CONNECT_TIMEOUT_MILLIS,
                  (int) properties.firstByteTimeout().toMillis())
              .followRedirect(false)
              .compress(false);
      this.pingClient =
          WebClient.builder().clientConnector(new ReactorClientHttpConnector(ping)).build();
    } else {
      this.loops = null;
      this.pool = null;
      this.client = null;
      this.pingClient = null;
    }
  }

  /** No cluster: every blob comes from the upstream (for services built without Spring). */
  static PeerSource none() {
    return new PeerSource();
  }

  private PeerSource() {
    this.membership = null;
    this.token = null;
    this.metrics = null;
    this.loops = null;
    this.pool = null;
    this.client = null;
    this.pingClient = null;
    this.firstByteTimeout = null;
  }

  /** Whether this replica is one of several (a cluster is configured). */
  boolean clustered() {
    return membership != null && membership.enabled();
  }

  /** The replica to fetch {@code digest} from, when it is owned by another one. */
  Optional<Member> ownerElsewhere(Digest digest) {
    return membership == null ? Optional.empty() : membership.ownerElsewhere(digest.toString());
  }

  /**
   * {@code GET} of the blob from {@code owner}'s peer endpoint; {@code fromUpstream} when the owner
   * cannot give it.
   *
   * @return the blob's size and body as the owner (or the upstream) sends them, unverified; an
   *     {@code OciException} {@code BLOB_UNKNOWN} (404) when the owner's upstream has no such blob
   */
  Mono<UpstreamBlob> fetch(
      Member owner,
      Upstream upstream,
      RepositoryName name,
      Digest digest,
      Supplier<Mono<UpstreamBlob>> fromUpstream) {
    URI uri =
        URI.create(
            "http://"
                + owner.id()
                + PeerProtocol.BLOBS
                + UriUtils.encodePathSegment(upstream.key(), StandardCharsets.UTF_8)
                + "/"
                + name.value()
                + "/"
                + digest);
    String what = upstream.key() + "/" + name + "@" + digest + " from owner " + owner;
    return PullSpan.aroundWith(
        "peer fetch",
        hop -> fetch(uri, what, owner, hop, fromUpstream),
        "registry.peer.owner",
        owner.id(),
        "registry.digest",
        digest.toString());
  }

  private Mono<UpstreamBlob> fetch(
      URI uri, String what, Member owner, PullSpan hop, Supplier<Mono<UpstreamBlob>> fromUpstream) {
    AtomicBoolean answered = new AtomicBoolean();
    WebClient.RequestHeadersSpec<?> request =
        client.get().uri(uri).header(HttpHeaders.AUTHORIZATION, token.authorization());
    if (hop != null) {
      hop.inject((header, value) -> request.header(header, value));
    }
    return request
        .retrieve()
        .onStatus(status -> true, response -> Mono.empty()) // every status is handled below
        .toEntityFlux(DataBuffer.class)
        .doOnNext(entity -> answered.set(true))
        .timeout(silence(owner, answered), Mono.error(() -> new OwnerSilent(firstByteTimeout)))
        .flatMap(entity -> answer(entity, what, fromUpstream))
        .onErrorResume(
            e -> !(e instanceof OciException),
            e -> ownerUnusable(owner, "blob " + what, e, fromUpstream));
  }

  /**
   * The replica that owns manifest {@code reference} of {@code name} at {@code upstream}, when
   * another one.
   */
  Optional<Member> manifestOwnerElsewhere(
      Upstream upstream, RepositoryName name, Reference reference) {
    if (membership == null) {
      return Optional.empty();
    }
    // A digest has one owner wherever it is pulled from (as a blob's); a tag, per upstream and
    // repository.
    return membership.ownerElsewhere(
        reference instanceof Reference.ByDigest byDigest
            ? byDigest.digest().toString()
            : upstream.key() + "/" + name.value() + ":" + reference);
  }

  /**
   * {@code GET} of the manifest from {@code owner}'s peer endpoint; {@code fromUpstream} when the
   * owner cannot give it (unreachable, silent for {@code cluster.read-timeout}, an error status
   * other than "no such manifest", more than {@code maxBytes} bytes).
   *
   * @return the owner's bytes, media type and digest, unverified (the caller verifies them as it
   *     does an upstream's); an {@link UpstreamException} {@code MANIFEST_UNKNOWN} (404) when the
   *     owner's upstream has no such manifest
   */
  Mono<UpstreamManifest> fetchManifest(
      Member owner,
      Upstream upstream,
      RepositoryName name,
      Reference reference,
      int maxBytes,
      Supplier<Mono<UpstreamManifest>> fromUpstream) {
    URI uri =
        URI.create(
            "http://"
                + owner.id()
                + PeerProtocol.MANIFESTS
                + UriUtils.encodePathSegment(upstream.key(), StandardCharsets.UTF_8)
                + "/"
                + name.value()
                + "/"
                + reference);
    String what =
        "manifest " + upstream.key() + "/" + name + ":" + reference + " from owner " + owner;
    return PullSpan.aroundWith(
        "peer fetch",
        hop -> fetchManifest(uri, what, owner, hop, maxBytes, fromUpstream, upstream),
        "registry.peer.owner",
        owner.id(),
        "registry.reference",
        reference.toString());
  }

  private Mono<UpstreamManifest> fetchManifest(
      URI uri,
      String what,
      Member owner,
      PullSpan hop,
      int maxBytes,
      Supplier<Mono<UpstreamManifest>> fromUpstream,
      Upstream upstream) {
    AtomicBoolean answered = new AtomicBoolean();
    WebClient.RequestHeadersSpec<?> request =
        client.get().uri(uri).header(HttpHeaders.AUTHORIZATION, token.authorization());
    if (hop != null) {
      hop.inject((header, value) -> request.header(header, value));
    }
    return request
        .exchangeToMono(
            response -> {
              answered.set(true);
              int status = response.statusCode().value();
              if (status == 200) {
                HttpHeaders headers = response.headers().asHttpHeaders();
                String digest = headers.getFirst("Docker-Content-Digest");
                String type =
                    headers.getContentType() == null
                        ? null
                        : headers.getContentType().getType()
                            + "/"
                            + headers.getContentType().getSubtype();
                return DataBufferUtils.join(response.bodyToFlux(DataBuffer.class), maxBytes)
                    .map(
                        buffer -> {
                          byte[] bytes = new byte[buffer.readableByteCount()];
                          buffer.read(bytes);
                          DataBufferUtils.release(buffer);
                          return bytes;
                        })
                    .defaultIfEmpty(new byte[0])
                    .map(
                        body -> {
                          metrics.request(Direction.OUT, Outcome.OK);
                          return new UpstreamManifest(
                              body, type, digest == null ? null : ownersDigest(digest));
                        });
              }
              if (status == 404
                  && response.headers().asHttpHeaders().containsHeader(PeerProtocol.HEADER)) {
                metrics.request(Direction.OUT, Outcome.NOT_FOUND);
                return response
                    .releaseBody()
                    .then(
                        Mono.error(
                            new UpstreamException(
                                upstream.key(),
                                OciErrorCode.MANIFEST_UNKNOWN,
                                HttpStatus.NOT_FOUND,
                                what + ": the upstream has no such manifest",
                                null,
                                null)));
              }
              metrics.request(Direction.OUT, Outcome.FAILED);
              metrics.fallback(FallbackReason.ERROR_STATUS);
              log.warn("{}: owner answered {}; fetching from the upstream", what, status);
              return response.releaseBody().then(Mono.defer(fromUpstream));
            })
        .timeout(silence(owner, answered), Mono.error(() -> new OwnerSilent(firstByteTimeout)))
        .onErrorResume(
            e -> !(e instanceof OciException), e -> ownerUnusable(owner, what, e, fromUpstream));
  }

  /**
   * The owner did not answer, or its answer broke off or was unusable: counted as a fallback, the
   * owner suspected when its connection failed or it stayed silent, and the upstream asked instead.
   */
  private <T> Mono<T> ownerUnusable(
      Member owner, String what, Throwable e, Supplier<Mono<T>> fromUpstream) {
    metrics.request(Direction.OUT, Outcome.FAILED);
    metrics.fallback(FallbackReason.UNREACHABLE);
    if (connectionFailed(e)) {
      if (membership.suspect(owner)) {
        metrics.suspicion(SuspicionReason.UNREACHABLE);
      }
    } else if (e instanceof OwnerSilent) {
      if (membership.suspect(owner)) {
        metrics.suspicion(SuspicionReason.SILENT);
      }
    }
    log.warn(
        "{}: owner unreachable or its answer unusable ({}); fetching from the upstream",
        what,
        e.toString());
    return fromUpstream.get();
  }

  /**
   * Emits when {@code owner} has not started its answer ({@code answered}) within {@code
   * first-byte-timeout} and does not answer a {@link PeerProtocol#PING} within as long again: the
   * owner is hung. Never emits (nor completes) otherwise, so the request goes on under {@code
   * read-timeout}.
   */
  private Mono<Long> silence(Member owner, AtomicBoolean answered) {
    return Mono.delay(firstByteTimeout)
        .flatMap(
            tick ->
                answered.get()
                    ? Mono.<Long>never()
                    : alive(owner)
                        .flatMap(
                            alive ->
                                alive || answered.get() ? Mono.<Long>never() : Mono.just(tick)));
  }

  /**
   * Whether {@code owner} answers {@link PeerProtocol#PING} with any HTTP status within {@code
   * first-byte-timeout}, on a new connection (not one waiting in the pool behind requests to a busy
   * owner); false when it does not, or refuses the connection.
   */
  Mono<Boolean> alive(Member owner) {
    return pingClient
        .get()
        .uri(URI.create("http://" + owner.id() + PeerProtocol.PING))
        .header(HttpHeaders.AUTHORIZATION, token.authorization())
        .exchangeToMono(response -> response.releaseBody().thenReturn(true))
        .timeout(firstByteTimeout)
        .onErrorReturn(false);
  }

  /** An owner that accepted a request and answered neither it nor a probe in time: hung. */
  static final class OwnerSilent extends RuntimeException {
    OwnerSilent(Duration timeout) {
      super(
          "the owner started no answer within "
              + timeout
              + " and answered no ping within as long again",
          null,
          false,
          false);
    }
  }

  /**
   * The owner's {@code Docker-Content-Digest}; a malformed one makes its answer unusable (not the
   * client's error).
   */
  private static Digest ownersDigest(String header) {
    try {
      return Digest.parse(header);
    } catch (OciException e) {
      throw new IllegalStateException(
          "malformed Docker-Content-Digest from the owner: " + header, e);
    }
  }

  /** A refused or timed-out connection (not a slow or broken answer of a live owner). */
  static boolean connectionFailed(Throwable e) {
    for (Throwable t = e; t != null; t = t.getCause()) {
      if (t instanceof ConnectException) { // Netty's ConnectTimeoutException is one too
        return true;
      }
    }
    return false;
  }

  private Mono<UpstreamBlob> answer(
      ResponseEntity<Flux<DataBuffer>> entity,
      String what,
      Supplier<Mono<UpstreamBlob>> fromUpstream) {
    int status = entity.getStatusCode().value();
    Flux<DataBuffer> body = entity.getBody() == null ? Flux.empty() : entity.getBody();
    if (status == 200) {
      metrics.request(Direction.OUT, Outcome.OK);
      log.debug("blob {}: streaming", what);
      return Mono.just(
          new UpstreamBlob(
              entity.getHeaders().getContentLength(), resumable(body, what, fromUpstream)));
    }
    Mono<Void> drain = body.doOnNext(DataBufferUtils::release).then().onErrorComplete();
    if (status == 404 && entity.getHeaders().containsHeader(PeerProtocol.HEADER)) {
      metrics.request(Direction.OUT, Outcome.NOT_FOUND);
      return drain.then(
          Mono.error(OciException.blobUnknown(what + ": the upstream has no such blob")));
    }
    metrics.request(Direction.OUT, Outcome.FAILED);
    metrics.fallback(FallbackReason.ERROR_STATUS);
    log.warn("blob {}: owner answered {}; fetching from the upstream", what, status);
    return drain.then(Mono.defer(fromUpstream));
  }

  /** The owner's body; if it breaks off, the rest of a fresh upstream fetch. */
  private Flux<DataBuffer> resumable(
      Flux<DataBuffer> body, String what, Supplier<Mono<UpstreamBlob>> fromUpstream) {
    AtomicLong received = new AtomicLong();
    return body.doOnNext(b -> received.addAndGet(b.readableByteCount()))
        .onErrorResume(
            e -> {
              long skip = received.get();
              metrics.fallback(FallbackReason.BROKEN_BODY);
              log.warn(
                  "blob {}: owner's body broke off after {} bytes ({}); the rest from the upstream",
                  what,
                  skip,
                  e.toString());
              return Mono.defer(fromUpstream).flatMapMany(blob -> skip(blob.body(), skip));
            });
  }

  /** {@code body} without its first {@code bytes} bytes; the buffers dropped are released. */
  static Flux<DataBuffer> skip(Flux<DataBuffer> body, long bytes) {
    return UpstreamBlob.skip(body, bytes);
  }

  @PreDestroy
  void close() {
    if (pool != null) {
      pool.disposeLater().block(Duration.ofSeconds(5));
    }
    if (loops != null) {
      loops.disposeLater(Duration.ZERO, Duration.ofSeconds(2)).block(Duration.ofSeconds(5));
    }
  }
}
