package io.registrycache.peer;

import io.registrycache.auth.Challenges;
import io.registrycache.cluster.ConditionalOnCluster;
import io.registrycache.cluster.PeerMetrics;
import io.registrycache.cluster.PeerMetrics.Direction;
import io.registrycache.cluster.PeerMetrics.Outcome;
import io.registrycache.cluster.PeerProtocol;
import io.registrycache.cluster.PeerToken;
import io.registrycache.oci.Digest;
import io.registrycache.oci.OciErrorCode;
import io.registrycache.oci.OciException;
import io.registrycache.oci.Reference;
import io.registrycache.oci.RepositoryName;
import io.registrycache.proxy.BlobSource;
import io.registrycache.proxy.ManifestResult;
import io.registrycache.proxy.ProxyBlobService;
import io.registrycache.proxy.ProxyManifestService;
import io.registrycache.tracing.PullSpan;
import io.registrycache.tracing.PullTracing;
import io.registrycache.upstream.Upstream;
import io.registrycache.upstream.Upstreams;
import java.nio.charset.StandardCharsets;
import java.util.List;
import java.util.Map;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import org.springframework.http.HttpHeaders;
import org.springframework.http.HttpMethod;
import org.springframework.http.HttpStatus;
import org.springframework.http.MediaType;
import org.springframework.http.ReactiveHttpOutputMessage;
import org.springframework.http.ZeroCopyHttpOutputMessage;
import org.springframework.stereotype.Component;
import org.springframework.web.reactive.function.BodyInserter;
import org.springframework.web.reactive.function.server.ServerRequest;
import org.springframework.web.reactive.function.server.ServerResponse;
import org.springframework.web.util.UriUtils;
import reactor.core.publisher.Mono;

/**
 * The owner's side of {@link PeerProtocol}: {@code GET
 * /internal/v1/blobs/<upstream-key>/<repository>/<digest>} and {@code GET
 * /internal/v1/manifests/<upstream-key>/<repository>/<reference>} with the cluster's bearer token,
 * answered by this replica's own pull-through ({@link ProxyBlobService#getForPeer}, {@link
 * ProxyManifestService#getForPeer}: the one single-flight joins local and peer requests,
 * content-scope links are respected, a miss is filled from the upstream). A blob's bytes are
 * streamed as they arrive (a stored blob goes zero-copy); a fill that fails mid-way breaks the
 * connection off, which the asking replica sees as a broken body, never as a clean end.
 *
 * <p>{@code GET /internal/v1/ping} (with the token) is answered 204 at once: the liveness probe a
 * replica sends an owner that has not started its answer within {@code cluster.first-byte-timeout}.
 *
 * <p>Served only on {@code cluster.peer-port} ({@link PeerServer}), never on the pull port.
 */
@Component
@ConditionalOnCluster
public class PeerEndpoint {

  private static final Logger log = LoggerFactory.getLogger(PeerEndpoint.class);

  private final PeerToken token;
  private final Upstreams upstreams;
  private final ProxyBlobService blobs;
  private final ProxyManifestService manifests;
  private final PeerMetrics metrics;
  private final PullTracing tracing;

  /**
   * @param tracing with tracing on, each blob or manifest request is a span continuing the asking
   *     replica's trace (its W3C {@code traceparent} header), so one trace covers both replicas
   */
  public PeerEndpoint(
      PeerToken token,
      Upstreams upstreams,
      ProxyBlobService blobs,
      ProxyManifestService manifests,
      PeerMetrics metrics,
      PullTracing tracing) {
    this.tracing = tracing;
    this.token = token;
    this.upstreams = upstreams;
    this.blobs = blobs;
    this.manifests = manifests;
    this.metrics = metrics;
  }

  /** Every request on the peer port: the token first, then the blob or the manifest route. */
  public Mono<ServerResponse> handle(ServerRequest request) {
    if (!token.accepts(request.headers().firstHeader(HttpHeaders.AUTHORIZATION))) {
      metrics.request(Direction.IN, Outcome.UNAUTHORIZED);
      log.info(
          "peer request {} {} from {}: missing or wrong token",
          request.method(),
          request.path(),
          request.remoteAddress().map(Object::toString).orElse("?"));
      return ServerResponse.status(HttpStatus.UNAUTHORIZED)
          .header(HttpHeaders.WWW_AUTHENTICATE, Challenges.bearer("registry-cache peers"))
          .contentType(MediaType.APPLICATION_JSON)
          .bodyValue(error(OciErrorCode.UNAUTHORIZED, "a peer request needs the cluster token"));
    }
    String path = request.requestPath().pathWithinApplication().value();
    if (path.equals(PeerProtocol.PING)) {
      return ServerResponse.noContent().header(PeerProtocol.HEADER, "1").build();
    }
    boolean blob = path.startsWith(PeerProtocol.BLOBS);
    if (!blob && !path.startsWith(PeerProtocol.MANIFESTS)) {
      return ServerResponse.status(HttpStatus.NOT_FOUND).build();
    }
    if (!HttpMethod.GET.equals(request.method())) {
      return ServerResponse.status(HttpStatus.METHOD_NOT_ALLOWED)
          .header(HttpHeaders.ALLOW, "GET")
          .build();
    }
    Mono<ServerResponse> served =
        Mono.defer(
                () ->
                    blob
                        ? blob(target(path.substring(PeerProtocol.BLOBS.length())))
                        : manifest(target(path.substring(PeerProtocol.MANIFESTS.length()))))
            .onErrorResume(this::failure);
    if (!tracing.enabled()) {
      return served;
    }
    // Ends with the response's status and headers; the bytes that follow are the fill's "blob
    // body".
    PullSpan span =
        tracing
            .continueFrom(
                blob ? "peer serve blob" : "peer serve manifest", request.headers()::firstHeader)
            .tag("registry.kind", blob ? "blob" : "manifest")
            .tag("registry.peer.path", path);
    return served
        .doOnNext(response -> span.tag("http.response.status_code", response.statusCode().value()))
        .doFinally(signal -> span.end())
        .contextWrite(span::into);
  }

  /** {@code <upstream-key>/<repository>/<last>} of a peer request's path. */
  private record Target(Upstream upstream, RepositoryName name, String last) {}

  private Target target(String rest) {
    int firstSlash = rest.indexOf('/');
    int lastSlash = rest.lastIndexOf('/');
    if (firstSlash <= 0 || lastSlash <= firstSlash + 1) {
      throw new OciException(
          OciErrorCode.NAME_INVALID, "expected <upstream-key>/<repository>/<digest or tag>");
    }
    String key = UriUtils.decode(rest.substring(0, firstSlash), StandardCharsets.UTF_8);
    RepositoryName name = RepositoryName.parse(rest.substring(firstSlash + 1, lastSlash));
    // A configured upstream by key; in any-upstream mode the key is the registry host.
    Upstream upstream = upstreams.byKey(key).orElseGet(() -> upstreams.forHost(key));
    return new Target(upstream, name, rest.substring(lastSlash + 1));
  }

  private Mono<ServerResponse> manifest(Target target) {
    Reference reference = Reference.parse(target.last());
    return manifests
        .getForPeer(target.upstream(), target.name(), reference)
        .flatMap(
            result -> {
              metrics.request(Direction.IN, Outcome.OK);
              ManifestResult manifest = result;
              log.debug(
                  "peer request for manifest {}/{}:{}: {}",
                  target.upstream().key(),
                  target.name(),
                  reference,
                  result.result());
              return ServerResponse.ok()
                  .header(PeerProtocol.HEADER, "1")
                  .header("Docker-Content-Digest", manifest.digest().toString())
                  .contentType(MediaType.parseMediaType(manifest.mediaType().value()))
                  .contentLength(manifest.body().length)
                  .bodyValue(manifest.body());
            });
  }

  private Mono<ServerResponse> blob(Target target) {
    Digest digest = Digest.parse(target.last());
    String key = target.upstream().key();
    RepositoryName name = target.name();
    return blobs
        .getForPeer(target.upstream(), name, digest)
        .flatMap(
            source -> {
              metrics.request(Direction.IN, Outcome.OK);
              log.debug(
                  "peer request for {}/{}@{}: {}",
                  key,
                  name,
                  digest,
                  source instanceof BlobSource.Stored ? "stored" : "downloading");
              ServerResponse.BodyBuilder ok =
                  ServerResponse.ok()
                      .header(PeerProtocol.HEADER, "1")
                      .header("Docker-Content-Digest", digest.toString())
                      .contentType(MediaType.APPLICATION_OCTET_STREAM);
              if (source.size() >= 0) {
                ok.contentLength(source.size());
              }
              if (!source.complete()) {
                return ok.body(
                    (message, context) ->
                        message.writeWith(source.read(0, -1, message.bufferFactory())));
              }
              return ok.body(whole(source));
            });
  }

  private Mono<ServerResponse> failure(Throwable error) {
    OciException oci =
        error instanceof OciException o
            ? o
            : new OciException(
                OciErrorCode.UNKNOWN, "internal error: " + error.getClass().getSimpleName());
    metrics.request(
        Direction.IN, oci.status() == HttpStatus.NOT_FOUND ? Outcome.NOT_FOUND : Outcome.ERROR);
    if (oci.status().is5xxServerError()) {
      log.warn(
          "peer request failed: {} {}",
          oci.status().value(),
          oci.getMessage(),
          error instanceof OciException ? null : error);
    }
    return ServerResponse.status(oci.status())
        .header(PeerProtocol.HEADER, "1")
        .contentType(MediaType.APPLICATION_JSON)
        .bodyValue(error(oci.code(), oci.getMessage()));
  }

  private static Map<String, Object> error(OciErrorCode code, String message) {
    return Map.of(
        "errors", List.of(Map.of("code", code.name(), "message", message == null ? "" : message)));
  }

  /**
   * The whole stored blob: a file region (sendfile) when the store names a file, else its stream.
   */
  private static BodyInserter<BlobSource, ReactiveHttpOutputMessage> whole(BlobSource content) {
    return (message, context) -> {
      if (message instanceof ZeroCopyHttpOutputMessage zeroCopy && content.file().isPresent()) {
        return zeroCopy.writeWith(content.file().get(), 0, content.size());
      }
      return message.writeWith(content.read(0, content.size(), message.bufferFactory()));
    };
  }
}
