package io.registrycache.api;

import io.registrycache.auth.AuthenticationRequired;
import io.registrycache.auth.Identity;
import io.registrycache.auth.PullAuthentication;
import io.registrycache.metrics.CacheMetrics;
import io.registrycache.metrics.CacheMetrics.Kind;
import io.registrycache.metrics.CacheMetrics.Result;
import io.registrycache.oci.LinkHeader;
import io.registrycache.oci.OciErrorCode;
import io.registrycache.oci.OciException;
import io.registrycache.proxy.ProxyTagService;
import java.net.URI;
import java.time.Duration;
import org.springframework.boot.availability.ApplicationAvailability;
import org.springframework.boot.availability.ReadinessState;
import org.springframework.http.HttpHeaders;
import org.springframework.http.HttpMethod;
import org.springframework.http.MediaType;
import org.springframework.http.server.reactive.ServerHttpRequestDecorator;
import org.springframework.stereotype.Component;
import org.springframework.web.reactive.function.server.ServerRequest;
import org.springframework.web.reactive.function.server.ServerResponse;
import reactor.core.publisher.Mono;
import reactor.netty.http.server.HttpServerRequest;

/**
 * The part of the read-only OCI Distribution API (Spec v1.1, Pull category) that WebFlux serves:
 * {@code /v2/}, tags and referrers, for GET and HEAD. Manifests and blobs are served by the pull
 * route ({@link PullRoute}) before a request reaches WebFlux. Every other method is {@code
 * UNSUPPORTED} (405): this is a pull-only cache.
 */
@Component
public class RegistryHandler {

  static final String DOCKER_CONTENT_DIGEST = "Docker-Content-Digest";
  static final String OCI_NAMESPACE = "OCI-Namespace";

  private final ProxyTagService tags;
  private final CacheMetrics metrics;
  private final ReferrersResponder referrers;
  private final PullAuthentication authentication;
  private final RequestTarget.Resolver targets;

  private final ApplicationAvailability availability;

  /**
   * @param availability the application's readiness, which {@code /v2/} answers by
   */
  public RegistryHandler(
      ProxyTagService tags,
      CacheMetrics metrics,
      ReferrersResponder referrers,
      PullAuthentication authentication,
      RequestTarget.Resolver targets,
      ApplicationAvailability availability) {
    this.availability = availability;
    this.tags = tags;
    this.metrics = metrics;
    this.referrers = referrers;
    this.authentication = authentication;
    this.targets = targets;
  }

  /**
   * {@code GET|HEAD /v2/}: the API version check. With an upstream that takes each client's own
   * credentials ({@code credentials: passthrough}), a request without credentials is 401 with the
   * Basic challenge even while the cache's own authentication is off, as Docker clients send
   * credentials only to a registry that challenged them here. Until the application is ready
   * (Spring Boot's {@link ReadinessState#ACCEPTING_TRAFFIC}: started in full, the management port
   * too), and again while it shuts down, 503 {@code UNAVAILABLE} with {@code Retry-After: 1}: a
   * client's first pulls then do not run while the start-up still takes the CPU
   * (docs/performance.md, issue 28), and clients see at once that a stopping replica takes no new
   * pulls.
   */
  public Mono<ServerResponse> base(ServerRequest request) {
    if (!isRead(request)) {
      return OciErrors.toResponse(request, unsupported(request));
    }
    if (availability.getReadinessState() != ReadinessState.ACCEPTING_TRAFFIC) {
      return OciErrors.toResponse(
          request,
          new OciException(
              OciErrorCode.UNAVAILABLE,
              OciErrorCode.UNAVAILABLE.defaultStatus(),
              "the cache is starting or stopping; retry in a second",
              null,
              Duration.ofSeconds(1),
              null));
    }
    if (authentication.passthrough()
        && !authentication.enabled()
        && request.headers().header(HttpHeaders.AUTHORIZATION).isEmpty()) {
      return OciErrors.toResponse(
          request,
          new AuthenticationRequired(
              authentication.challenge(),
              "credentials are passed through to an upstream: log in with them"));
    }
    ServerResponse.BodyBuilder ok = ServerResponse.ok().contentType(MediaType.APPLICATION_JSON);
    return HttpMethod.HEAD.equals(request.method())
        ? ok.contentLength(2).build()
        : ok.bodyValue("{}");
  }

  /** Every request below {@code /v2/<name>/}. */
  public Mono<ServerResponse> dispatch(ServerRequest request) {
    return Mono.defer(() -> route(request)).onErrorResume(e -> OciErrors.toResponse(request, e));
  }

  private Mono<ServerResponse> route(ServerRequest request) {
    HttpTarget target = target(request);
    RegistryPath path = RegistryPath.parse(target.path());
    // GET and HEAD of manifests and blobs never get here: the pull route (PullRoute) takes them
    // by the same parse of the same target, ahead of WebFlux.
    boolean listing =
        path.endpoint() == RegistryPath.Endpoint.TAGS
            || path.endpoint() == RegistryPath.Endpoint.REFERRERS;
    if (!isRead(request) || !listing) {
      throw unsupported(request);
    }
    return targets.serve(
        path,
        target.queryParam("ns"),
        request.attribute(Identity.ATTRIBUTE).map(Identity.class::cast).orElse(Identity.ANONYMOUS),
        request.headers().header(HttpHeaders.AUTHORIZATION),
        () -> target.absoluteUri(request.uri().getScheme()),
        resolved ->
            path.endpoint() == RegistryPath.Endpoint.TAGS
                ? tagList(request, resolved, path)
                : referrers.respond(request, resolved, path));
  }

  /**
   * The request's target as {@link HttpTarget} parses it: from the raw request line Reactor Netty
   * received when there is one (WebFlux's own URI may carry forwarded headers' values), else from
   * the request's URI and {@code Host}.
   */
  static HttpTarget target(ServerRequest request) {
    Object nativeRequest;
    try {
      nativeRequest = ServerHttpRequestDecorator.getNativeRequest(request.exchange().getRequest());
    } catch (IllegalArgumentException e) {
      nativeRequest = null; // a request WebFlux did not get from a server (tests)
    }
    if (nativeRequest instanceof HttpServerRequest netty) {
      return HttpTarget.parse(netty.uri(), netty.requestHeaders().getAll(HttpHeaders.HOST));
    }
    URI uri = request.uri();
    return HttpTarget.parse(
        uri.getRawPath() + (uri.getRawQuery() != null ? "?" + uri.getRawQuery() : ""),
        request.headers().header(HttpHeaders.HOST));
  }

  private Mono<ServerResponse> tagList(
      ServerRequest request, RequestTarget target, RegistryPath path) {
    Integer n = request.queryParam("n").map(RegistryHandler::parsePageSize).orElse(null);
    String last = request.queryParam("last").orElse(null);
    return tags.list(target.upstream(), target.name(), n, last)
        .doOnError(e -> metrics.request(Kind.TAGS, Result.ERROR, target.upstream().key()))
        .flatMap(
            page -> {
              metrics.request(
                  Kind.TAGS,
                  page.fromCache() ? Result.STALE : Result.MISS,
                  target.upstream().key());
              ServerResponse.BodyBuilder ok =
                  ServerResponse.ok().contentType(MediaType.APPLICATION_JSON);
              namespace(ok, target);
              if (page.nextQuery() != null) {
                String next =
                    "/v2/"
                        + path.rawName()
                        + "/tags/list?"
                        + page.nextQuery()
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
      throw new OciException(
          OciErrorCode.SIZE_INVALID, "n must be a non-negative integer, got '" + value + "'");
    }
  }

  private static void namespace(ServerResponse.BodyBuilder builder, RequestTarget target) {
    if (target.namespace() != null) {
      builder.header(OCI_NAMESPACE, target.namespace());
    }
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
