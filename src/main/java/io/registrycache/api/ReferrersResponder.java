package io.registrycache.api;

import io.registrycache.config.RegistryCacheProperties;
import io.registrycache.metrics.CacheMetrics;
import io.registrycache.metrics.CacheMetrics.Kind;
import io.registrycache.metrics.CacheMetrics.Result;
import io.registrycache.oci.Digest;
import io.registrycache.oci.LinkHeader;
import io.registrycache.proxy.ProxyReferrersService;
import org.springframework.http.HttpHeaders;
import org.springframework.http.HttpMethod;
import org.springframework.http.MediaType;
import org.springframework.stereotype.Component;
import org.springframework.web.reactive.function.server.ServerRequest;
import org.springframework.web.reactive.function.server.ServerResponse;
import org.springframework.web.util.UriComponentsBuilder;
import reactor.core.publisher.Mono;

/**
 * {@code GET|HEAD /v2/<name>/referrers/<digest>[?artifactType=...]} (OCI Distribution Spec v1.1,
 * "Listing Referrers"): always 200 with an image index ({@code
 * application/vnd.oci.image.index.v1+json}) for a well-formed digest, empty when nothing refers to
 * it. With {@code artifactType} only matching descriptors are listed and {@code
 * OCI-Filters-Applied: artifactType} is sent. More than {@code referrers.page-size} descriptors are
 * paged: {@code Link: <...&last=<digest>>; rel="next"}. A malformed digest is {@code
 * DIGEST_INVALID} (400).
 */
@Component
public class ReferrersResponder {

  static final String FILTERS_APPLIED = "OCI-Filters-Applied";
  private static final MediaType INDEX =
      MediaType.parseMediaType("application/vnd.oci.image.index.v1+json");

  private final ProxyReferrersService referrers;
  private final CacheMetrics metrics;
  private final int pageSize;

  public ReferrersResponder(
      ProxyReferrersService referrers, CacheMetrics metrics, RegistryCacheProperties properties) {
    this.referrers = referrers;
    this.metrics = metrics;
    this.pageSize = properties.referrers().pageSize();
  }

  Mono<ServerResponse> respond(ServerRequest request, RequestTarget target, RegistryPath path) {
    Digest subject = Digest.parse(path.reference());
    String artifactType = request.queryParam("artifactType").filter(s -> !s.isEmpty()).orElse(null);
    String last = request.queryParam("last").filter(s -> !s.isEmpty()).orElse(null);
    return referrers
        .list(target.upstream(), target.name(), subject)
        .doOnError(e -> metrics.request(Kind.REFERRERS, Result.ERROR, target.upstream().key()))
        .flatMap(
            list -> {
              metrics.request(Kind.REFERRERS, list.result(), target.upstream().key());
              ProxyReferrersService.Page page = list.page(artifactType, last, pageSize);
              ServerResponse.BodyBuilder ok =
                  ServerResponse.ok().contentType(INDEX).contentLength(page.body().length);
              if (target.namespace() != null) {
                ok.header(RegistryHandler.OCI_NAMESPACE, target.namespace());
              }
              if (artifactType != null) {
                ok.header(FILTERS_APPLIED, "artifactType");
              }
              if (page.nextAfter() != null) {
                UriComponentsBuilder next =
                    UriComponentsBuilder.fromPath(
                        "/v2/" + path.rawName() + "/referrers/" + subject);
                if (artifactType != null) {
                  next.queryParam("artifactType", artifactType);
                }
                next.queryParam("last", page.nextAfter());
                if (target.namespace() != null) {
                  next.queryParam("ns", target.namespace());
                }
                ok.header(HttpHeaders.LINK, LinkHeader.next(next.encode().build().toUriString()));
              }
              if (HttpMethod.HEAD.equals(request.method())) {
                return ok.build();
              }
              metrics.served(list.result() != Result.MISS, page.body().length);
              return ok.bodyValue(page.body());
            });
  }
}
