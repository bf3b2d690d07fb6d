package io.registrycache.api;

import io.registrycache.metrics.CacheMetrics;
import io.registrycache.metrics.CacheMetrics.Kind;
import io.registrycache.metrics.CacheMetrics.Result;
import io.registrycache.oci.Digest;
import io.registrycache.oci.OciErrorCode;
import io.registrycache.oci.OciException;
import io.registrycache.oci.Reference;
import io.registrycache.proxy.BlobSource;
import io.registrycache.proxy.ProxyBlobService;
import io.registrycache.proxy.ProxyManifestService;
import io.registrycache.proxy.ProxyTagService;
import io.registrycache.storage.StoredManifest;
import io.registrycache.upstream.UpstreamRegistry;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;

import org.springframework.core.io.FileSystemResource;
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

  private final UpstreamRegistry upstreams;
  private final ProxyManifestService manifests;
  private final ProxyBlobService blobs;
  private final ProxyTagService tags;
  private final CacheMetrics metrics;

  public RegistryHandler(
      UpstreamRegistry upstreams,
      ProxyManifestService manifests,
      ProxyBlobService blobs,
      ProxyTagService tags,
      CacheMetrics metrics) {
    this.upstreams = upstreams;
    this.manifests = manifests;
    this.blobs = blobs;
    this.tags = tags;
    this.metrics = metrics;
  }

  /** {@code GET|HEAD /v2/}: the API version check. */
  public Mono<ServerResponse> base(ServerRequest request) {
    if (!isRead(request)) {
      return OciErrors.toResponse(request, unsupported(request));
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
    return switch (path.endpoint()) {
      case MANIFEST -> manifest(request, target, Reference.parse(path.reference()));
      case BLOB -> blob(request, target, Digest.parse(path.reference()));
      case TAGS -> tagList(request, target, path);
      case REFERRERS -> throw new OciException(
          OciErrorCode.NAME_UNKNOWN, HttpStatus.NOT_FOUND, "the referrers API is not offered by this cache");
      case BLOB_UPLOAD -> throw unsupported(request);
    };
  }

  private Mono<ServerResponse> manifest(ServerRequest request, RequestTarget target, Reference reference) {
    List<String> accept = acceptedTypes(request);
    return manifests
        .get(target.upstream(), target.name(), reference, accept)
        .doOnError(e -> metrics.request(Kind.MANIFEST, Result.ERROR, target.upstream().key()))
        .flatMap(
            result -> {
              metrics.request(Kind.MANIFEST, result.result(), target.upstream().key());
              StoredManifest m = result.manifest();
              ServerResponse.BodyBuilder ok =
                  ServerResponse.ok()
                      .contentType(mediaType(m.mediaType()))
                      .header(DOCKER_CONTENT_DIGEST, m.digest().toString())
                      .eTag("\"" + m.digest() + "\"")
                      .contentLength(m.body().length);
              namespace(ok, target);
              if (HttpMethod.HEAD.equals(request.method())) {
                return ok.build();
              }
              metrics.served(result.result() != Result.MISS, m.body().length);
              return ok.bodyValue(m.body());
            });
  }

  private Mono<ServerResponse> blob(ServerRequest request, RequestTarget target, Digest digest) {
    boolean head = HttpMethod.HEAD.equals(request.method());
    return blobs
        .get(target.upstream(), target.name(), digest)
        .doOnError(e -> metrics.request(Kind.BLOB, Result.ERROR, target.upstream().key()))
        .flatMap(
            source -> {
              metrics.request(
                  Kind.BLOB, source instanceof BlobSource.Stored ? Result.HIT : Result.MISS, target.upstream().key());
              if (source instanceof BlobSource.Downloading d && d.size() < 0 && (head || hasRange(request))) {
                // Without a known size neither HEAD nor a range can be answered before the end.
                return d.download().completion().then(blobs.get(target.upstream(), target.name(), digest));
              }
              return Mono.just(source);
            })
        .flatMap(source -> blobResponse(request, target, source, head));
  }

  private Mono<ServerResponse> blobResponse(
      ServerRequest request, RequestTarget target, BlobSource source, boolean head) {
    ServerResponse.BodyBuilder ok =
        ServerResponse.ok()
            .contentType(MediaType.APPLICATION_OCTET_STREAM)
            .header(DOCKER_CONTENT_DIGEST, source.digest().toString())
            .header(HttpHeaders.ACCEPT_RANGES, "bytes")
            .eTag("\"" + source.digest() + "\"");
    namespace(ok, target);
    if (source instanceof BlobSource.Stored stored) {
      if (head) {
        return ok.contentLength(stored.size()).build();
      }
      if (hasRange(request) && !satisfiable(request, stored.size())) {
        return rangeNotSatisfiable(stored.size());
      }
      metrics.served(true, servedLength(request, stored.size()));
      // Spring's resource writer answers Range with 206 and uses zero-copy file transfer.
      return ok.body(BodyInserters.fromResource(new FileSystemResource(stored.path())));
    }
    BlobSource.Downloading downloading = (BlobSource.Downloading) source;
    long size = downloading.size();
    if (head) {
      return ok.contentLength(size).build();
    }
    long start = 0;
    long end = -1;
    if (hasRange(request)) {
      HttpRange range;
      try {
        List<HttpRange> ranges = HttpRange.parseRanges(request.headers().firstHeader(HttpHeaders.RANGE));
        range = ranges.size() == 1 ? ranges.get(0) : null;
        if (range != null) {
          start = range.getRangeStart(size);
          end = range.getRangeEnd(size);
          if (start >= size || end < start) {
            return rangeNotSatisfiable(size);
          }
        }
      } catch (IllegalArgumentException e) {
        return rangeNotSatisfiable(size);
      }
      if (range != null) {
        ok = ServerResponse.status(HttpStatus.PARTIAL_CONTENT)
            .contentType(MediaType.APPLICATION_OCTET_STREAM)
            .header(DOCKER_CONTENT_DIGEST, source.digest().toString())
            .header(HttpHeaders.ACCEPT_RANGES, "bytes")
            .header(HttpHeaders.CONTENT_RANGE, "bytes " + start + "-" + end + "/" + size);
        namespace(ok, target);
        size = end - start + 1;
      }
    }
    if (size >= 0) {
      ok.contentLength(size);
    }
    return ok.body(
        BodyInserters.fromDataBuffers(
            downloading.download().read(start, end).doOnNext(b -> metrics.served(false, b.readableByteCount()))));
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
                ok.header(HttpHeaders.LINK, "<" + next + ">; rel=\"next\"");
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

  /** Whether the request's Range can be answered for a blob of {@code size} bytes (RFC 9110 14.1). */
  private static boolean satisfiable(ServerRequest request, long size) {
    try {
      for (HttpRange range : HttpRange.parseRanges(request.headers().firstHeader(HttpHeaders.RANGE))) {
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

  private static long servedLength(ServerRequest request, long size) {
    if (!hasRange(request)) {
      return size;
    }
    try {
      List<HttpRange> ranges = HttpRange.parseRanges(request.headers().firstHeader(HttpHeaders.RANGE));
      return ranges.size() == 1 ? ranges.get(0).getRangeEnd(size) - ranges.get(0).getRangeStart(size) + 1 : size;
    } catch (IllegalArgumentException e) {
      return 0;
    }
  }

  private static boolean hasRange(ServerRequest request) {
    return request.headers().firstHeader(HttpHeaders.RANGE) != null;
  }

  private static void namespace(ServerResponse.BodyBuilder builder, RequestTarget target) {
    if (target.namespace() != null) {
      builder.header(OCI_NAMESPACE, target.namespace());
    }
  }

  private static MediaType mediaType(String value) {
    try {
      return MediaType.parseMediaType(value);
    } catch (InvalidMediaTypeException e) {
      return MediaType.APPLICATION_OCTET_STREAM;
    }
  }

  /** The media types of the client's {@code Accept} headers, without parameters; may be empty. */
  static List<String> acceptedTypes(ServerRequest request) {
    List<String> types = new ArrayList<>();
    for (String header : request.headers().header(HttpHeaders.ACCEPT)) {
      for (String part : header.split(",")) {
        int semicolon = part.indexOf(';');
        String type = (semicolon < 0 ? part : part.substring(0, semicolon)).trim().toLowerCase();
        if (!type.isEmpty()) {
          types.add(type);
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
