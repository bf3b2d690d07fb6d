package io.registrycache.upstream;

import io.registrycache.oci.Digest;
import io.registrycache.oci.LinkHeader;
import io.registrycache.oci.OciErrorCode;
import io.registrycache.oci.RepositoryName;
import io.registrycache.upstream.UpstreamCaller.Request;
import java.net.URI;
import java.util.List;
import org.springframework.http.HttpHeaders;
import reactor.core.publisher.Mono;

/**
 * {@code GET /v2/<name>/referrers/<digest>} (OCI distribution-spec 1.1, "Listing referrers"),
 * through the {@link UpstreamCaller}: one page, and where the next one is.
 */
final class ReferrersLister {

  private final UpstreamCaller caller;

  ReferrersLister(UpstreamCaller caller) {
    this.caller = caller;
  }

  /**
   * One page of the image index of {@code subject}'s referrers: the first when {@code page} is
   * null, else that page, which must be on the upstream's own origin. Errors: {@code NAME_UNKNOWN}
   * (404), {@code UPSTREAM_UNAVAILABLE} (502) for a page elsewhere or above {@value
   * UpstreamCaller#MAX_LIST_BYTES} bytes, else as {@link UpstreamErrors}.
   */
  Mono<UpstreamReferrers> list(Upstream upstream, RepositoryName name, Digest subject, URI page) {
    String what = "referrers of " + name + "@" + subject;
    URI uri =
        page != null ? page : UpstreamCaller.uri(upstream, name, "referrers", subject.toString());
    if (!UpstreamAddressPolicy.sameOrigin(uri, upstream.url())) {
      return Mono.error(
          UpstreamErrors.unavailable(upstream, what + ": next page is on another host", null));
    }
    Request request = Request.get(uri, name, List.of("application/vnd.oci.image.index.v1+json"));
    return caller.call(
        upstream,
        "referrers",
        what,
        request,
        reply -> {
          if (!reply.ok()) {
            return caller.failure(upstream, what, OciErrorCode.NAME_UNKNOWN, reply);
          }
          URI next = nextPage(upstream.url(), reply.headers().getFirst(HttpHeaders.LINK));
          return UpstreamCaller.listBody(upstream, what, reply)
              .map(body -> new UpstreamReferrers(body, next));
        });
  }

  /** The target of {@code Link: <...>; rel="next"}, resolved against the upstream URL, or null. */
  static URI nextPage(URI base, String link) {
    return LinkHeader.nextTarget(link)
        .map(
            target -> {
              try {
                return base.resolve(target);
              } catch (IllegalArgumentException e) {
                return null;
              }
            })
        .orElse(null);
  }
}
