package io.registrycache.upstream;

import io.registrycache.oci.OciErrorCode;
import io.registrycache.oci.RepositoryName;
import io.registrycache.upstream.UpstreamCaller.Request;
import java.net.URI;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import org.springframework.http.HttpHeaders;
import org.springframework.web.util.UriComponentsBuilder;
import reactor.core.publisher.Mono;

/**
 * {@code GET /v2/<name>/tags/list?n=&last=} (OCI distribution-spec, "Listing tags"), through the
 * {@link UpstreamCaller}: one page, with its {@code Link} header.
 */
final class TagLister {

  private final UpstreamCaller caller;

  TagLister(UpstreamCaller caller) {
    this.caller = caller;
  }

  /**
   * One page of tags (at most {@value UpstreamCaller#MAX_LIST_BYTES} bytes). Errors: {@code
   * NAME_UNKNOWN} (404), {@code UPSTREAM_UNAVAILABLE} (502) for a larger page, else as {@link
   * UpstreamErrors}.
   */
  Mono<UpstreamTags> list(Upstream upstream, RepositoryName name, Integer n, String last) {
    String what = "tags of " + name;
    UriComponentsBuilder builder =
        UriComponentsBuilder.fromUri(upstream.url()).path("/v2/" + name.value() + "/tags/list");
    if (n != null) {
      builder.queryParam("n", n);
    }
    if (last != null) {
      builder.queryParam("last", "{last}"); // a template variable: encoded strictly, '+' too
    }
    URI uri = builder.encode().buildAndExpand(Map.of("last", Objects.toString(last, ""))).toUri();
    return caller.call(
        upstream,
        "tags",
        what,
        Request.get(uri, name, List.of("application/json")),
        reply -> {
          if (!reply.ok()) {
            return caller.failure(upstream, what, OciErrorCode.NAME_UNKNOWN, reply);
          }
          String link = reply.headers().getFirst(HttpHeaders.LINK);
          return UpstreamCaller.listBody(upstream, what, reply)
              .map(body -> new UpstreamTags(body, link));
        });
  }
}
