package io.registrycache.upstream;

import io.registrycache.oci.Digest;
import io.registrycache.oci.OciErrorCode;
import io.registrycache.oci.Reference;
import io.registrycache.oci.RepositoryName;
import java.net.URI;
import java.util.List;
import org.springframework.http.HttpStatus;
import reactor.core.publisher.Mono;

/**
 * Pull-only access to upstream registries (OCI Distribution Spec v1.1, Pull category), with
 * registry authentication done the jib-core way. Never blocks the calling thread.
 *
 * <p>Errors arrive as {@link UpstreamException} (a kind of {@code OciException}): an upstream 404
 * becomes {@code MANIFEST_UNKNOWN} / {@code BLOB_UNKNOWN} / {@code NAME_UNKNOWN} (404), 401 {@code
 * UNAUTHORIZED}, 403 {@code DENIED}, 429 {@code TOOMANYREQUESTS} with the upstream's {@code
 * Retry-After}, and a refused connection, a timeout, a 5xx or nonsense {@code UPSTREAM_UNAVAILABLE}
 * with 502, 503 or 504 and a message naming the upstream and the reason.
 */
public interface UpstreamClient {

  /**
   * {@code GET /v2/<name>/manifests/<reference>}.
   *
   * @param accept media types for the {@code Accept} header, in order of preference
   * @return the manifest's raw bytes; bodies over {@code maxBytes} fail with {@code
   *     MANIFEST_INVALID}
   */
  Mono<UpstreamManifest> getManifest(
      Upstream upstream,
      RepositoryName name,
      Reference reference,
      List<String> accept,
      int maxBytes);

  /** {@code HEAD /v2/<name>/manifests/<reference>}. */
  Mono<UpstreamManifestHead> headManifest(
      Upstream upstream, RepositoryName name, Reference reference, List<String> accept);

  /**
   * {@code GET /v2/<name>/blobs/<digest>}, following redirects (without forwarding the upstream
   * {@code Authorization} to another host). The returned body is not verified: the caller checks
   * the digest.
   */
  Mono<UpstreamBlob> getBlob(Upstream upstream, RepositoryName name, Digest digest);

  /**
   * {@code GET /v2/<name>/blobs/<digest>} from byte {@code offset} on: the rest of a blob whose
   * transfer broke off, asked for with {@code Range: bytes=<offset>-} (RFC 9110 14.2). An upstream
   * that answers {@code 206} with the matching {@code Content-Range} sends only the rest; one that
   * ignores the range ({@code 200}) sends the whole blob again, and the bytes before {@code offset}
   * are skipped here (a blob is content-addressed: they are the same bytes, and the caller verifies
   * the whole). The body starts at {@code offset}; {@link UpstreamBlob#size} is the whole blob's.
   *
   * @param offset the first byte wanted, 0 for the whole blob
   */
  default Mono<UpstreamBlob> getBlob(
      Upstream upstream, RepositoryName name, Digest digest, long offset) {
    return getBlob(upstream, name, digest)
        .map(blob -> new UpstreamBlob(blob.size(), UpstreamBlob.skip(blob.body(), offset)));
  }

  /**
   * {@code HEAD /v2/<name>/blobs/<digest>}.
   *
   * @return the blob's size in bytes ({@code Content-Length}), or -1 when not sent
   */
  Mono<Long> headBlob(Upstream upstream, RepositoryName name, Digest digest);

  /**
   * {@code GET /v2/<name>/tags/list?n=&last=}.
   *
   * @param n page size, or {@code null} for the upstream's default
   * @param last the last tag of the previous page (exclusive), or {@code null}
   */
  Mono<UpstreamTags> listTags(Upstream upstream, RepositoryName name, Integer n, String last);

  /**
   * One page of {@code GET /v2/<name>/referrers/<digest>} (OCI Distribution Spec v1.1, "Listing
   * Referrers"). An upstream without the API answers 404: an {@link UpstreamException} whose {@link
   * UpstreamException#isNotFound()} is true.
   *
   * @param page the next page's URI from the previous page's {@code Link}, or {@code null} for the
   *     first page; it must be on the upstream's host
   */
  default Mono<UpstreamReferrers> listReferrers(
      Upstream upstream, RepositoryName name, Digest subject, URI page) {
    return Mono.error(
        new UpstreamException(
            upstream.key(),
            OciErrorCode.NAME_UNKNOWN,
            HttpStatus.NOT_FOUND,
            "referrers API not available",
            null,
            null));
  }
}
