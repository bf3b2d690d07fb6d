package io.registrycache.api;

import io.registrycache.auth.AuthenticationRequired;
import io.registrycache.auth.Identity;
import io.registrycache.auth.PullAuthentication;
import io.registrycache.auth.PullAuthorization;
import io.registrycache.metrics.CacheMetrics;
import io.registrycache.metrics.CacheMetrics.Kind;
import io.registrycache.metrics.CacheMetrics.Result;
import io.registrycache.oci.Digest;
import io.registrycache.oci.LinkHeader;
import io.registrycache.oci.OciErrorCode;
import io.registrycache.oci.OciException;
import io.registrycache.oci.Reference;
import io.registrycache.proxy.BlobSource;
import io.registrycache.proxy.PassthroughAccess;
import io.registrycache.proxy.ProxyBlobService;
import io.registrycache.proxy.ProxyManifestService;
import io.registrycache.proxy.ProxyTagService;
import io.registrycache.upstream.ClientCredential;
import io.registrycache.upstream.Upstreams;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;

import org.springframework.core.io.FileSystemResource;
import org.springframework.http.ReactiveHttpOutputMessage;
import org.springframework.http.ZeroCopyHttpOutputMessage;
import org.springframework.util.MimeTypeUtils;
import org.springframework.web.reactive.function.BodyInserter;
import org.springframework.http.HttpHeaders;
import org.springframework.http.HttpMethod;
import org.springframework.http.HttpRange;
import org.springframework.http.HttpStatus;
import org.springframework.http.InvalidMediaTypeException;
import org.springframework.http.MediaType;
import org.springframework.stereotype.Component;
import org.springframework.web.reactive.function.BodyInserters;
import org.springframework.web.reactive.function.server.ServerRequest;
import org.springframework.web.reactive.function.server.ServerResponse;
import org.springframework.web.util.UriUtils;
import reactor.core.publisher.Mono;

/**
 * The read-only OCI Distribution API (Spec v1.1, Pull category): {@code /v2/}, manifests, blobs
 * and tags, for GET and HEAD. Every other method is {@code UNSUPPORTED} (405): this is a
 * pull-only cache.
 */
@Component
public class RegistryHandler {

  static final String DOCKER_CONTENT_DIGEST = "Docker-Content-Digest";
  static final String OCI_NAMESPACE = "OCI-Namespace";

  private final Upstreams upstreams;
  private final ProxyManifestService manifests;
  private final ProxyBlobService blobs;
  private final ProxyTagService tags;
  private final CacheMetrics metrics;
  private final ReferrersResponder referrers;
  private final PullAuthorization authorization;
  private final PullAuthentication authentication;
  private final PassthroughAccess passthrough;

  public RegistryHandler(
      Upstreams upstreams,
      ProxyManifestService manifests,
      ProxyBlobService blobs,
      ProxyTagService tags,
      CacheMetrics metrics,
      ReferrersResponder referrers,
      PullAuthorization authorization,
      PullAuthentication authentication,
      PassthroughAccess passthrough) {
    this.authentication = authentication;
    this.passthrough = passthrough;
    this.upstreams = upstreams;
    this.manifests = manifests;
    this.blobs = blobs;
    this.tags = tags;
    this.metrics = metrics;
    this.referrers = referrers;
    this.authorization = authorization;
  }

  /**
   * {@code GET|HEAD /v2/}: the API version check. With an upstream that takes each client's own
   * credentials ({@code credentials: passthrough}), a request without credentials is 401 with the
   * Basic challenge even while the cache's own authentication is off, as Docker clients send
   * credentials only to a registry that challenged them here.
   */
  public Mono<ServerResponse> base(ServerRequest request) {
    if (!isRead(request)) {
      return OciErrors.toResponse(request, unsupported(request));
    }
    if (authentication.passthrough() && !authentication.enabled()
        && request.headers().header(HttpHeaders.AUTHORIZATION).isEmpty()) {
      return OciErrors.toResponse(request, new AuthenticationRequired(authentication.challenge(),
          "credentials are passed through to an upstream: log in with them"));
    }
    ServerResponse.BodyBuilder ok = ServerResponse.ok().contentType(MediaType.APPLICATION_JSON);
    return HttpMethod.HEAD.equals(request.method()) ? ok.contentLength(2).build() : ok.bodyValue("{}");
  }

  /** Every request below {@code /v2/<name>/}. */
  public Mono<ServerResponse> dispatch(ServerRequest request) {
    return Mono.defer(() -> route(request)).onErrorResume(e -> OciErrors.toResponse(request, e));
  }

  private Mono<ServerResponse> route(ServerRequest request) {
    String raw = request.requestPath().pathWithinApplication().value();
    String rest = UriUtils.decode(raw.substring("/v2/".length()), StandardCharsets.UTF_8);
    RegistryPath path = RegistryPath.parse(rest);
    if (!isRead(request) || path.endpoint() == RegistryPath.Endpoint.BLOB_UPLOAD) {
      throw unsupported(request);
    }
    String ns = request.queryParam("ns").orElse(null);
    RequestTarget target = RequestTarget.resolve(path.rawName(), ns, upstreams);
    // Rules apply to the resolved upstream and canonical name, whatever the request's form; then
    // the upstream's pull-through lists, so that a client without the right learns nothing of them.
    authorization.check(
        request.attribute(Identity.ATTRIBUTE).map(Identity.class::cast).orElse(Identity.ANONYMOUS),
        path.rawName(), target.upstream().key(), target.name().value(), request.uri(),
        target.upstream().passthrough());
    target.requirePullThrough();
    if (!target.upstream().passthrough()) {
      return serve(request, target, path);
    }
    // Pass-through: the client's own credentials go to the upstream, which first confirms that
    // they may pull this repository before anything cached (or in flight) is served to them.
    RequestTarget client = target.forClient(clientCredential(request));
    PassthroughAccess.Probe probe = switch (path.endpoint()) {
      case MANIFEST -> new PassthroughAccess.Probe.Manifest(Reference.parse(path.reference()));
      case BLOB -> new PassthroughAccess.Probe.Blob(Digest.parse(path.reference()));
      default -> new PassthroughAccess.Probe.Repository();
    };
    return passthrough.confirm(client.upstream(), client.name(), probe)
        .then(Mono.defer(() -> serve(request, client, path)))
        .onErrorMap(
            e -> e instanceof OciException oci && oci.code() == OciErrorCode.UNAUTHORIZED
                && !(e instanceof AuthenticationRequired),
            e -> new AuthenticationRequired(
                authentication.enabled() ? authentication.challenge(request.uri(), path.rawName()) : authentication.challenge(),
                e.getMessage()));
  }

  private Mono<ServerResponse> serve(ServerRequest request, RequestTarget target, RegistryPath path) {
    return switch (path.endpoint()) {
      case MANIFEST -> manifest(request, target, Reference.parse(path.reference()));
      case BLOB -> blob(request, target, Digest.parse(path.reference()));
      case TAGS -> tagList(request, target, path);
      case REFERRERS -> referrers.respond(request, target, path);
      case BLOB_UPLOAD -> throw unsupported(request);
    };
  }

  /** The credentials the request gives for a pass-through upstream; anonymous without. */
  private ClientCredential clientCredential(ServerRequest request) {
    return authentication.passthroughCredentials(request.headers().header(HttpHeaders.AUTHORIZATION))
        .map(c -> new ClientCredential(c.user(), c.password()))
        .orElse(ClientCredential.ANONYMOUS);
  }

  private Mono<ServerResponse> manifest(ServerRequest request, RequestTarget target, Reference reference) {
    List<String> accept = acceptedTypes(request);
    return manifests
        .get(target.upstream(), target.name(), reference, accept)
        .doOnError(e -> metrics.request(Kind.MANIFEST, Result.ERROR, target.upstream().key()))
        .flatMap(
            result -> {
              metrics.request(Kind.MANIFEST, result.result(), target.upstream().key());
              ServerResponse.BodyBuilder ok =
                  ServerResponse.ok()
                      .contentType(MediaType.parseMediaType(result.mediaType().value()))
                      .header(DOCKER_CONTENT_DIGEST, result.digest().toString())
                      .eTag("\"" + result.digest() + "\"")
                      .contentLength(result.body().length);
              namespace(ok, target);
              if (HttpMethod.HEAD.equals(request.method())) {
                return ok.build();
              }
              metrics.served(result.result() != Result.MISS, result.body().length);
              return ok.bodyValue(result.body());
            });
  }

  private Mono<ServerResponse> blob(ServerRequest request, RequestTarget target, Digest digest) {
    boolean head = HttpMethod.HEAD.equals(request.method());
    List<HttpRange> ranges;
    try {
      ranges = HttpRange.parseRanges(request.headers().firstHeader(HttpHeaders.RANGE));
    } catch (IllegalArgumentException e) {
      ranges = null; // malformed: 416 once the size is known
    }
    List<HttpRange> parsed = ranges;
    ProxyBlobService.Want want =
        head ? ProxyBlobService.Want.HEAD
            : parsed == null || !parsed.isEmpty() ? ProxyBlobService.Want.RANGE : ProxyBlobService.Want.BODY;
    return blobs
        .get(target.upstream(), target.name(), digest, want)
        .doOnError(e -> metrics.request(Kind.BLOB, Result.ERROR, target.upstream().key()))
        .flatMap(
            source -> {
              boolean hit = source.hit();
              metrics.request(Kind.BLOB, hit ? Result.HIT : Result.MISS, target.upstream().key());
              return blobResponse(target, source, head, parsed);
            });
  }

  /**
   * The answer for a blob: 200 with the whole blob, or 206 with one range (RFC 9110 14), or 416.
   * A stored blob whose store names its file is sent zero-copy; otherwise its bytes are streamed,
   * or, when the store offers a URL for them ({@code storage.s3.redirect}), 307 to that URL.
   *
   * @param ranges the request's ranges, empty without a {@code Range} header, {@code null} when
   *     the header is malformed
   */
  private Mono<ServerResponse> blobResponse(
      RequestTarget target, BlobSource source, boolean head, List<HttpRange> ranges) {
    if (head) {
      return blobHeaders(ServerResponse.ok(), target, source.digest()).contentLength(source.size()).build();
    }
    if (!source.complete()) {
      // Whole body only: the service waits for the verified blob for a range.
      ServerResponse.BodyBuilder ok = blobHeaders(ServerResponse.ok(), target, source.digest());
      if (source.size() >= 0) {
        ok.contentLength(source.size());
      }
      return ok.body(
          (message, context) ->
              message.writeWith(
                  source
                      .read(0, -1, message.bufferFactory())
                      .doOnNext(b -> metrics.served(false, b.readableByteCount()))));
    }
    BlobSource stored = source;
    long size = stored.size();
    java.util.Optional<java.net.URI> elsewhere = stored.redirect();
    if (elsewhere.isPresent()) {
      // storage.s3.redirect: the client fetches the verified object from the store itself,
      // sending its Range header there (S3 answers ranges); the digest header is ours.
      return ServerResponse.status(HttpStatus.TEMPORARY_REDIRECT)
          .header(DOCKER_CONTENT_DIGEST, source.digest().toString())
          .location(elsewhere.get())
          .build();
    }
    if (ranges != null && ranges.isEmpty()) {
      metrics.served(true, size);
      return blobHeaders(ServerResponse.ok(), target, source.digest())
          .contentLength(size)
          .body(content(stored, 0, size));
    }
    if (ranges == null || !satisfiable(ranges, size)) {
      return rangeNotSatisfiable(size);
    }
    if (ranges.size() > 1 && stored.file().isPresent()) {
      // Spring's resource writer answers several ranges as multipart/byteranges.
      metrics.served(true, size);
      return blobHeaders(ServerResponse.ok(), target, source.digest())
          .body(BodyInserters.fromResource(new FileSystemResource(stored.file().get())));
    }
    if (ranges.size() > 1) {
      // HTTP lets a server answer a multi-range request with the whole representation.
      metrics.served(true, size);
      return blobHeaders(ServerResponse.ok(), target, source.digest()).contentLength(size).body(content(stored, 0, size));
    }
    long start = ranges.get(0).getRangeStart(size);
    long end = ranges.get(0).getRangeEnd(size);
    long length = end - start + 1;
    metrics.served(true, length);
    return blobHeaders(ServerResponse.status(HttpStatus.PARTIAL_CONTENT), target, source.digest())
        .header(HttpHeaders.CONTENT_RANGE, "bytes " + start + "-" + end + "/" + size)
        .contentLength(length)
        .body(content(stored, start, length));
  }

  private static ServerResponse.BodyBuilder blobHeaders(
      ServerResponse.BodyBuilder builder, RequestTarget target, Digest digest) {
    builder
        .contentType(MediaType.APPLICATION_OCTET_STREAM)
        .header(DOCKER_CONTENT_DIGEST, digest.toString())
        .header(HttpHeaders.ACCEPT_RANGES, "bytes")
        .eTag("\"" + digest + "\"");
    namespace(builder, target);
    return builder;
  }

  /**
   * Bytes {@code [position, position + count)} of stored content: zero-copy (a file region) when
   * the store names a file and the server is Reactor Netty, else the store's stream.
   */
  private static BodyInserter<BlobSource, ReactiveHttpOutputMessage> content(
      BlobSource content, long position, long count) {
    return (message, context) -> {
      if (message instanceof ZeroCopyHttpOutputMessage zeroCopy && content.file().isPresent()) {
        return zeroCopy.writeWith(content.file().get(), position, count);
      }
      return message.writeWith(content.read(position, count, message.bufferFactory()));
    };
  }

  private Mono<ServerResponse> tagList(ServerRequest request, RequestTarget target, RegistryPath path) {
    Integer n = request.queryParam("n").map(RegistryHandler::parsePageSize).orElse(null);
    String last = request.queryParam("last").orElse(null);
    return tags.list(target.upstream(), target.name(), n, last)
        .doOnError(e -> metrics.request(Kind.TAGS, Result.ERROR, target.upstream().key()))
        .flatMap(
            page -> {
              metrics.request(Kind.TAGS, page.fromCache() ? Result.STALE : Result.MISS, target.upstream().key());
              ServerResponse.BodyBuilder ok = ServerResponse.ok().contentType(MediaType.APPLICATION_JSON);
              namespace(ok, target);
              if (page.nextQuery() != null) {
                String next = "/v2/" + path.rawName() + "/tags/list?" + page.nextQuery()
                    + (target.namespace() != null ? "&ns=" + target.namespace() : "");
                ok.header(HttpHeaders.LINK, LinkHeader.next(next));
              }
              return HttpMethod.HEAD.equals(request.method())
                  ? ok.contentLength(page.body().length).build()
                  : ok.bodyValue(page.body());
            });
  }

  private static Integer parsePageSize(String value) {
    try {
      int n = Integer.parseInt(value);
      if (n < 0) {
        throw new NumberFormatException();
      }
      return n;
    } catch (NumberFormatException e) {
      throw new OciException(OciErrorCode.SIZE_INVALID, "n must be a non-negative integer, got '" + value + "'");
    }
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

  private static Mono<ServerResponse> rangeNotSatisfiable(long size) {
    return ServerResponse.status(HttpStatus.REQUESTED_RANGE_NOT_SATISFIABLE)
        .header(HttpHeaders.CONTENT_RANGE, "bytes */" + size)
        .build();
  }

  private static void namespace(ServerResponse.BodyBuilder builder, RequestTarget target) {
    if (target.namespace() != null) {
      builder.header(OCI_NAMESPACE, target.namespace());
    }
  }

  /**
   * The media ranges of the client's {@code Accept} headers, parsed with Spring's {@link
   * MediaType}, without parameters ({@code q} included); malformed ranges are skipped. Empty when
   * the client sent none.
   */
  static List<String> acceptedTypes(ServerRequest request) {
    List<String> types = new ArrayList<>();
    for (String header : request.headers().header(HttpHeaders.ACCEPT)) {
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

  private static boolean isRead(ServerRequest request) {
    return HttpMethod.GET.equals(request.method()) || HttpMethod.HEAD.equals(request.method());
  }

  private static OciException unsupported(ServerRequest request) {
    return new OciException(
        OciErrorCode.UNSUPPORTED,
        request.method() + " is not supported: registry-cache is a pull-only cache");
  }

}
