package io.registrycache.api;

import io.netty.buffer.ByteBuf;
import io.netty.buffer.Unpooled;
import io.netty.handler.codec.http.HttpHeaderNames;
import io.netty.handler.codec.http.HttpMethod;
import io.netty.handler.codec.http.HttpResponseStatus;
import io.registrycache.auth.Identity;
import io.registrycache.metrics.CacheMetrics;
import io.registrycache.metrics.CacheMetrics.Kind;
import io.registrycache.metrics.CacheMetrics.Result;
import io.registrycache.metrics.PullActivity;
import io.registrycache.oci.Digest;
import io.registrycache.oci.OciException;
import io.registrycache.oci.Reference;
import io.registrycache.proxy.BlobSource;
import io.registrycache.proxy.CacheOutcome;
import io.registrycache.proxy.FillPermits;
import io.registrycache.proxy.ProxyBlobService;
import io.registrycache.proxy.ProxyManifestService;
import io.registrycache.tracing.PullSpan;
import io.registrycache.tracing.PullTracing;
import java.net.InetSocketAddress;
import java.net.URI;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.Optional;
import java.util.function.Supplier;
import org.springframework.beans.factory.annotation.Value;
import org.springframework.boot.reactor.netty.NettyReactiveWebServerFactory;
import org.springframework.boot.web.server.WebServerFactoryCustomizer;
import org.springframework.core.io.buffer.NettyDataBufferFactory;
import org.springframework.http.HttpHeaders;
import org.springframework.http.HttpRange;
import org.springframework.http.InvalidMediaTypeException;
import org.springframework.http.MediaType;
import org.springframework.http.support.Netty4HeadersAdapter;
import org.springframework.stereotype.Component;
import org.springframework.util.MimeTypeUtils;
import org.springframework.web.util.ForwardedHeaderUtils;
import reactor.core.publisher.Flux;
import reactor.core.publisher.Mono;
import reactor.core.publisher.SignalType;
import reactor.netty.http.server.HttpServerRequest;
import reactor.netty.http.server.HttpServerResponse;
import reactor.netty.http.server.HttpServerRoutes;

/**
 * The pull endpoints — GET and HEAD of {@code /v2/<name>/manifests/<reference>} and {@code
 * /v2/<name>/blobs/<digest>} (OCI Distribution Spec v1.1, end-1 to end-3) — served on Reactor Netty
 * directly, as a route ahead of WebFlux on the pull port: every pull passes here, so it passes
 * through one operator chain of its own instead of WebFlux's exchange, filter chain, handler
 * mapping and response writers (docs/performance.md, "The pull route"). What the web filters do for
 * the other {@code /v2} requests is done here as plain calls: the {@link PullGate} (authentication,
 * rate limits), {@link RequestTarget.Resolver} (rules, pull-through lists, pass-through
 * credentials), the {@code Docker-Distribution-API-Version} header, {@code
 * registry_cache_responses_total}, pull activity, the {@link AccessLog} and, with tracing on, the
 * request's span ({@link PullTracing}, docs/tracing.md).
 *
 * <p>Every request on the pull port passes {@link HttpTarget} here first, whatever its path or
 * method: a {@code /v2} target it refuses is answered 400 {@code NAME_INVALID} by this route, so
 * WebFlux, authentication and the access log only ever see targets it accepted, and see them as it
 * parsed them. Errors before the response starts are OCI error answers ({@link OciErrors#answer});
 * an error after it started (a blob whose download failed mid-body) aborts the connection, so a
 * client never sees a clean end of bad content. Requests this route does not take — other paths and
 * methods, {@code /v2/}, tags and referrers — go on to WebFlux ({@link RegistryRoutes}).
 */
@Component
public class PullRoute implements WebServerFactoryCustomizer<NettyReactiveWebServerFactory> {

  private static final String API_VERSION = "Docker-Distribution-API-Version";
  private static final String DOCKER_CONTENT_DIGEST = RegistryHandler.DOCKER_CONTENT_DIGEST;
  private static final String OCTET_STREAM = "application/octet-stream";

  private final ProxyManifestService manifests;
  private final ProxyBlobService blobs;
  private final CacheMetrics metrics;
  private final PullActivity activity;
  private final PullGate gate;
  private final RequestTarget.Resolver targets;
  private final AccessLog accessLog; // null when off (registry-cache.access-log.enabled)
  private final PullTracing tracing; // null when off: then no request enters its classes

  /**
   * {@code server.forward-headers-strategy=framework}: the client address from the forwarded
   * headers, read here.
   */
  private final boolean forwardedByFramework;

  /**
   * @param forwardHeadersStrategy Spring Boot's {@code server.forward-headers-strategy}: with
   *     {@code native}, Reactor Netty gives the forwarded client address itself; with {@code
   *     framework}, this route reads {@code Forwarded} / {@code X-Forwarded-For} as WebFlux's
   *     transformer does
   * @param tracing each request in a span of its own when tracing is on
   */
  public PullRoute(
      ProxyManifestService manifests,
      ProxyBlobService blobs,
      CacheMetrics metrics,
      PullActivity activity,
      PullGate gate,
      RequestTarget.Resolver targets,
      AccessLog accessLog,
      @Value("${server.forward-headers-strategy:none}") String forwardHeadersStrategy,
      PullTracing tracing) {
    this.tracing = tracing.enabled() ? tracing : null;
    this.forwardedByFramework = "framework".equalsIgnoreCase(forwardHeadersStrategy);
    this.manifests = manifests;
    this.blobs = blobs;
    this.metrics = metrics;
    this.activity = activity;
    this.gate = gate;
    this.targets = targets;
    this.accessLog = accessLog.configured() ? accessLog : null;
  }

  /** Puts this route ahead of WebFlux on the pull port's server (not the management port's). */
  @Override
  public void customize(NettyReactiveWebServerFactory factory) {
    factory.addRouteProviders(this::routes);
  }

  HttpServerRoutes routes(HttpServerRoutes routes) {
    return routes.route(PullRoute::takes, this::handle);
  }

  /**
   * A request this route takes: its method, its path as sent (for logs), the parsed target and
   * path, or, for a target {@link HttpTarget} refused, why ({@code refused}; then {@code rawPath}
   * is the whole target as sent).
   */
  private record Pull(
      boolean head, String rawPath, HttpTarget target, RegistryPath path, OciException refused) {}

  /**
   * Whether this route answers: a {@code /v2} target that {@link HttpTarget} refuses (400, any
   * method), and GET and HEAD of manifests and blobs. Everything else goes on to WebFlux.
   */
  private static boolean takes(HttpServerRequest request) {
    HttpTarget target;
    try {
      target =
          HttpTarget.parse(request.uri(), request.requestHeaders().getAll(HttpHeaderNames.HOST));
    } catch (OciException refused) {
      return true;
    }
    if (!target.registry() || target.base()) {
      return false;
    }
    HttpMethod method = request.method();
    if (!HttpMethod.GET.equals(method) && !HttpMethod.HEAD.equals(method)) {
      return false;
    }
    String below = target.path();
    if (below.indexOf("/manifests/") < 0 && below.indexOf("/blobs/") < 0) {
      return false;
    }
    RegistryPath.Endpoint kind;
    try {
      kind = RegistryPath.parse(below).endpoint();
    } catch (OciException e) {
      return false; // no endpoint: WebFlux answers 404 NAME_UNKNOWN
    }
    return kind == RegistryPath.Endpoint.MANIFEST || kind == RegistryPath.Endpoint.BLOB;
  }

  private static Pull pull(HttpServerRequest request) {
    boolean head = HttpMethod.HEAD.equals(request.method());
    try {
      HttpTarget target =
          HttpTarget.parse(request.uri(), request.requestHeaders().getAll(HttpHeaderNames.HOST));
      return new Pull(head, target.rawPath(), target, RegistryPath.parse(target.path()), null);
    } catch (OciException refused) {
      return new Pull(head, request.uri(), null, null, refused);
    }
  }

  private Mono<Void> handle(HttpServerRequest request, HttpServerResponse response) {
    Pull pull = pull(request);
    response.header(API_VERSION, "registry/2.0");
    if (pull.refused() != null) {
      metrics.response(pull.refused().status().value());
      return error(response, request.method().name(), pull, pull.refused());
    }
    long started = System.nanoTime();
    activity.started();
    CacheOutcome outcome = accessLog != null && accessLog.enabled() ? new CacheOutcome() : null;
    PullSpan span = tracing != null ? started(pull) : null;
    Identity[] who = {null};
    String client = clientAddress(request, pull.target());
    Supplier<URI> requestUri = () -> pull.target().absoluteUri(request.scheme());
    Mono<Void> answer =
        gate.enter(
                request.requestHeaders().getAll(HttpHeaderNames.AUTHORIZATION),
                requestUri,
                client,
                false)
            .flatMap(
                entry -> {
                  who[0] = entry.identity();
                  Mono<Void> served =
                      Mono.defer(
                          () ->
                              targets.serve(
                                  pull.path(),
                                  pull.target().queryParam("ns"),
                                  entry.identity(),
                                  request.requestHeaders().getAll(HttpHeaderNames.AUTHORIZATION),
                                  requestUri,
                                  target ->
                                      pull.path().endpoint() == RegistryPath.Endpoint.MANIFEST
                                          ? manifest(request, response, pull, target, span, outcome)
                                          : blob(request, response, pull, target, span, outcome)));
                  return entry.permits() == null
                      ? served
                      : served.contextWrite(c -> c.put(FillPermits.CONTEXT_KEY, entry.permits()));
                })
            .onErrorResume(
                e -> !response.hasSentHeaders(),
                e -> error(response, pull.head() ? "HEAD" : "GET", pull, e));
    if (span != null) {
      answer = answer.contextWrite(span::into);
    }
    return answer.doFinally(
        signal -> {
          activity.ended();
          int status = response.status().code();
          metrics.response(status);
          if (span != null) {
            span.tag("http.response.status_code", status);
            if (signal == SignalType.CANCEL) {
              span.tag("registry.cancelled", "true");
            }
            span.end();
          }
          if (outcome != null) {
            String length = response.responseHeaders().get(HttpHeaderNames.CONTENT_LENGTH);
            accessLog.write(
                request.method().name(),
                pull.rawPath(),
                status,
                length == null ? -1 : Long.parseLong(length),
                started,
                outcome,
                signal == SignalType.CANCEL,
                gate.authenticating() ? who[0] : null);
          }
        });
  }

  /**
   * The request's span: {@code pull manifest} or {@code pull blob}, tagged with the method, the
   * repository and reference as the client named them (never a header: credentials stay out).
   */
  private PullSpan started(Pull pull) {
    boolean manifest = pull.path().endpoint() == RegistryPath.Endpoint.MANIFEST;
    return tracing
        .start(manifest ? "pull manifest" : "pull blob")
        .tag("http.request.method", pull.head() ? "HEAD" : "GET")
        .tag("registry.kind", manifest ? "manifest" : "blob")
        .tag("registry.repository", pull.path().rawName())
        .tag("registry.reference", pull.path().reference());
  }

  private static void traced(PullSpan span, RequestTarget target, Result result) {
    if (span != null) {
      span.tag("registry.upstream", target.upstream().key())
          .tag("registry.cache.result", result.name().toLowerCase(Locale.ROOT));
    }
  }

  /** The cache's answer into the request metric and, with the access log on, its line. */
  private void counted(Kind kind, Result result, String upstream, CacheOutcome outcome) {
    metrics.request(kind, result, upstream);
    if (outcome != null) {
      outcome.record(result, upstream);
    }
  }

  private Mono<Void> manifest(
      HttpServerRequest request,
      HttpServerResponse response,
      Pull pull,
      RequestTarget target,
      PullSpan span,
      CacheOutcome outcome) {
    List<String> accept = acceptedTypes(request.requestHeaders().getAll(HttpHeaderNames.ACCEPT));
    String upstream = target.upstream().key();
    return manifests
        .get(target.upstream(), target.name(), Reference.parse(pull.path().reference()), accept)
        .doOnError(e -> counted(Kind.MANIFEST, Result.ERROR, upstream, outcome))
        .flatMap(
            result -> {
              counted(Kind.MANIFEST, result.result(), upstream, outcome);
              traced(span, target, result.result());
              byte[] body = result.body();
              response
                  .status(HttpResponseStatus.OK)
                  .header(HttpHeaderNames.CONTENT_TYPE, result.mediaType().value())
                  .header(DOCKER_CONTENT_DIGEST, result.digest().toString())
                  .header(HttpHeaderNames.ETAG, "\"" + result.digest() + "\"")
                  .header(HttpHeaderNames.CONTENT_LENGTH, Integer.toString(body.length));
              namespace(response, target);
              if (pull.head()) {
                return response.send();
              }
              metrics.served(result.result() != Result.MISS, body.length);
              return response.send(Mono.just(Unpooled.wrappedBuffer(body))).then();
            });
  }

  private Mono<Void> blob(
      HttpServerRequest request,
      HttpServerResponse response,
      Pull pull,
      RequestTarget target,
      PullSpan span,
      CacheOutcome outcome) {
    List<HttpRange> ranges;
    try {
      ranges = HttpRange.parseRanges(request.requestHeaders().get(HttpHeaderNames.RANGE));
    } catch (IllegalArgumentException e) {
      ranges = null; // malformed: 416 once the size is known
    }
    List<HttpRange> parsed = ranges;
    ProxyBlobService.Want want =
        pull.head()
            ? ProxyBlobService.Want.HEAD
            : parsed == null || !parsed.isEmpty()
                ? ProxyBlobService.Want.RANGE
                : ProxyBlobService.Want.BODY;
    String upstream = target.upstream().key();
    return blobs
        .get(target.upstream(), target.name(), Digest.parse(pull.path().reference()), want)
        .doOnError(e -> counted(Kind.BLOB, Result.ERROR, upstream, outcome))
        .flatMap(
            source -> {
              Result result = source.hit() ? Result.HIT : Result.MISS;
              counted(Kind.BLOB, result, upstream, outcome);
              traced(span, target, result);
              return blobResponse(response, target, source, pull.head(), parsed);
            });
  }

  /**
   * A blob: 200 with the whole blob, 206 with one range (RFC 9110 14), or 416; a request for
   * several ranges gets the whole blob (RFC 9110 14.2 lets a server ignore Range). A stored blob
   * whose store names its file is sent zero-copy ({@code sendfile}); a blob still arriving streams
   * from its download; a store that offers a URL ({@code storage.s3.redirect}) gets 307 to it.
   *
   * @param ranges the request's ranges, empty without a {@code Range} header, {@code null} when the
   *     header is malformed
   */
  private Mono<Void> blobResponse(
      HttpServerResponse response,
      RequestTarget target,
      BlobSource source,
      boolean head,
      List<HttpRange> ranges) {
    if (head) {
      return blobHeaders(response, target, source.digest(), source.size()).send();
    }
    if (!source.complete()) {
      // Whole body only: the service waits for the verified blob for a range.
      blobHeaders(response, target, source.digest(), source.size());
      NettyDataBufferFactory buffers = new NettyDataBufferFactory(response.alloc());
      return send(
          response,
          source
              .read(0, -1, buffers)
              .map(
                  b -> {
                    metrics.served(false, b.readableByteCount());
                    return NettyDataBufferFactory.toByteBuf(b);
                  }));
    }
    long size = source.size();
    Optional<URI> elsewhere = source.redirect();
    if (elsewhere.isPresent()) {
      // The client fetches the verified object from the store itself, its Range header sent
      // there (S3 answers ranges); the digest header is ours.
      return response
          .status(HttpResponseStatus.TEMPORARY_REDIRECT)
          .header(DOCKER_CONTENT_DIGEST, source.digest().toString())
          .header(HttpHeaderNames.LOCATION, elsewhere.get().toASCIIString())
          .header(HttpHeaderNames.CONTENT_LENGTH, "0")
          .send();
    }
    if (ranges != null && (ranges.isEmpty() || (ranges.size() > 1 && satisfiable(ranges, size)))) {
      metrics.served(true, size);
      return content(blobHeaders(response, target, source.digest(), size), source, 0, size);
    }
    if (ranges == null || !satisfiable(ranges, size)) {
      return response
          .status(HttpResponseStatus.REQUESTED_RANGE_NOT_SATISFIABLE)
          .header(HttpHeaderNames.CONTENT_RANGE, "bytes */" + size)
          .header(HttpHeaderNames.CONTENT_LENGTH, "0")
          .send();
    }
    long start = ranges.get(0).getRangeStart(size);
    long end = ranges.get(0).getRangeEnd(size);
    long length = end - start + 1;
    metrics.served(true, length);
    blobHeaders(
            response.status(HttpResponseStatus.PARTIAL_CONTENT), target, source.digest(), length)
        .header(HttpHeaderNames.CONTENT_RANGE, "bytes " + start + "-" + end + "/" + size);
    return content(response, source, start, length);
  }

  private static HttpServerResponse blobHeaders(
      HttpServerResponse response, RequestTarget target, Digest digest, long length) {
    response
        .header(HttpHeaderNames.CONTENT_TYPE, OCTET_STREAM)
        .header(DOCKER_CONTENT_DIGEST, digest.toString())
        .header(HttpHeaderNames.ACCEPT_RANGES, "bytes")
        .header(HttpHeaderNames.ETAG, "\"" + digest + "\"");
    if (length >= 0) {
      response.header(HttpHeaderNames.CONTENT_LENGTH, Long.toString(length));
    }
    namespace(response, target);
    return response;
  }

  /**
   * Bytes {@code [position, position + count)} of a stored blob: zero-copy from its file when it
   * has one.
   */
  private static Mono<Void> content(
      HttpServerResponse response, BlobSource stored, long position, long count) {
    Optional<Path> file = stored.file();
    if (file.isPresent()) {
      return response.sendFile(file.get(), position, count).then();
    }
    NettyDataBufferFactory buffers = new NettyDataBufferFactory(response.alloc());
    return send(
        response, stored.read(position, count, buffers).map(NettyDataBufferFactory::toByteBuf));
  }

  /**
   * Sends {@code body}, the status and headers going out with its first buffer: a body that fails
   * before its first byte (an upstream that closes right after its headers) still gets an OCI error
   * answer; one that fails later aborts the connection.
   */
  private static Mono<Void> send(HttpServerResponse response, Flux<ByteBuf> body) {
    return body.switchOnFirst(
            (first, all) -> first.isOnError() ? all.then() : response.send(all).then())
        .then();
  }

  private static Mono<Void> error(
      HttpServerResponse response, String method, Pull pull, Throwable error) {
    OciErrors.Answer answer = OciErrors.answer(method, pull.rawPath(), error);
    response.status(answer.status().value());
    // Headers of the success answer being prepared must not describe the error.
    for (CharSequence name :
        List.of(
            HttpHeaderNames.CONTENT_TYPE,
            HttpHeaderNames.CONTENT_LENGTH,
            HttpHeaderNames.CONTENT_RANGE,
            HttpHeaderNames.ACCEPT_RANGES,
            HttpHeaderNames.ETAG,
            DOCKER_CONTENT_DIGEST)) {
      response.responseHeaders().remove(name);
    }
    answer.headers().forEach((name, values) -> response.responseHeaders().set(name, values));
    if (answer.body() == null) {
      return response.header(HttpHeaderNames.CONTENT_LENGTH, "0").send();
    }
    return response
        .header(HttpHeaderNames.CONTENT_TYPE, "application/json")
        .header(HttpHeaderNames.CONTENT_LENGTH, Integer.toString(answer.body().length))
        .send(Mono.just(Unpooled.wrappedBuffer(answer.body())))
        .then();
  }

  /** Whether every range can be answered for a blob of {@code size} bytes (RFC 9110 14.1.1). */
  private static boolean satisfiable(List<HttpRange> ranges, long size) {
    try {
      for (HttpRange range : ranges) {
        long start = range.getRangeStart(size);
        if (start >= size || range.getRangeEnd(size) < start) {
          return false;
        }
      }
      return true;
    } catch (IllegalArgumentException e) {
      return false;
    }
  }

  private static void namespace(HttpServerResponse response, RequestTarget target) {
    if (target.namespace() != null) {
      response.header(RegistryHandler.OCI_NAMESPACE, target.namespace());
    }
  }

  /**
   * The media ranges of the client's {@code Accept} headers, parsed with Spring's {@link
   * MediaType}, without parameters ({@code q} included); malformed ranges are skipped. Empty when
   * the client sent none.
   */
  static List<String> acceptedTypes(List<String> headers) {
    List<String> types = new ArrayList<>();
    for (String header : headers) {
      for (String part : MimeTypeUtils.tokenize(header)) {
        try {
          MediaType type = MediaType.parseMediaType(part);
          types.add(type.getType() + "/" + type.getSubtype());
        } catch (InvalidMediaTypeException e) {
          // a client's typo takes nothing away from the types it did name
        }
      }
    }
    return types;
  }

  /**
   * The client's IP address as text: the TCP peer's, or the forwarded one ({@code
   * server.forward-headers-strategy}).
   */
  private String clientAddress(HttpServerRequest request, HttpTarget target) {
    InetSocketAddress address = request.remoteAddress();
    if (forwardedByFramework) {
      // The URI only gives the default port of a forwarded address without one.
      URI uri =
          URI.create(
              request.scheme()
                  + "://"
                  + (target.authority() != null ? target.authority() : "localhost")
                  + "/");
      InetSocketAddress forwarded =
          ForwardedHeaderUtils.parseForwardedFor(
              uri, new HttpHeaders(new Netty4HeadersAdapter(request.requestHeaders())), address);
      address = forwarded != null ? forwarded : address;
    }
    if (address == null) {
      return null;
    }
    return address.getAddress() != null
        ? address.getAddress().getHostAddress()
        : address.getHostString();
  }
}
