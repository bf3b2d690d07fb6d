package io.registrycache.signature;

import io.registrycache.oci.Digest;
import io.registrycache.oci.OciErrorCode;
import io.registrycache.oci.Reference;
import io.registrycache.oci.RepositoryName;
import io.registrycache.upstream.Upstream;
import io.registrycache.upstream.UpstreamBlob;
import io.registrycache.upstream.UpstreamClient;
import io.registrycache.upstream.UpstreamException;
import io.registrycache.upstream.UpstreamManifest;
import io.registrycache.upstream.UpstreamManifestHead;
import io.registrycache.upstream.UpstreamReferrers;
import io.registrycache.upstream.UpstreamTags;
import java.net.URI;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import org.springframework.core.io.buffer.DefaultDataBufferFactory;
import org.springframework.http.HttpStatus;
import reactor.core.publisher.Flux;
import reactor.core.publisher.Mono;

/**
 * An upstream in memory, answering as {@link UpstreamClient} does: manifests by tag or digest,
 * blobs by digest, one referrers page, or 404s; and 502 {@code UPSTREAM_UNAVAILABLE} for what is
 * marked {@link #failing}. Repositories are not told apart.
 */
final class InMemoryUpstream implements UpstreamClient {

  private final Map<String, byte[]> manifests = new HashMap<>();
  private final Map<Digest, byte[]> blobs = new HashMap<>();
  private final Set<String> failing = new HashSet<>();
  private byte[] referrers;

  /** Serves {@code body} under {@code reference} (a tag, or a digest's string form). */
  InMemoryUpstream manifest(String reference, byte[] body) {
    manifests.put(reference, body);
    return this;
  }

  InMemoryUpstream blob(Digest digest, byte[] body) {
    blobs.put(digest, body);
    return this;
  }

  /** Has the referrers API, answering {@code index} for every subject (else it answers 404). */
  InMemoryUpstream referrers(byte[] index) {
    this.referrers = index;
    return this;
  }

  /** Fails with 502 for this manifest reference, blob digest or {@code "referrers"}. */
  InMemoryUpstream failing(String what) {
    failing.add(what);
    return this;
  }

  @Override
  public Mono<UpstreamManifest> getManifest(
      Upstream upstream,
      RepositoryName name,
      Reference reference,
      List<String> accept,
      int maxBytes) {
    String key = reference.toString();
    if (failing.contains(key)) {
      return Mono.error(unavailable(upstream, "manifest " + key));
    }
    byte[] body = manifests.get(key);
    return body == null
        ? Mono.error(notFound(upstream, OciErrorCode.MANIFEST_UNKNOWN, "manifest " + key))
        : Mono.just(new UpstreamManifest(body, accept.get(0), Digest.sha256(body)));
  }

  @Override
  public Mono<UpstreamBlob> getBlob(Upstream upstream, RepositoryName name, Digest digest) {
    if (failing.contains(digest.toString())) {
      return Mono.error(unavailable(upstream, "blob " + digest));
    }
    byte[] body = blobs.get(digest);
    return body == null
        ? Mono.error(notFound(upstream, OciErrorCode.BLOB_UNKNOWN, "blob " + digest))
        : Mono.just(
            new UpstreamBlob(
                body.length, Flux.just(DefaultDataBufferFactory.sharedInstance.wrap(body))));
  }

  @Override
  public Mono<UpstreamReferrers> listReferrers(
      Upstream upstream, RepositoryName name, Digest subject, URI page) {
    if (failing.contains("referrers")) {
      return Mono.error(unavailable(upstream, "referrers"));
    }
    return referrers == null
        ? UpstreamClient.super.listReferrers(upstream, name, subject, page)
        : Mono.just(new UpstreamReferrers(referrers, null));
  }

  @Override
  public Mono<UpstreamManifestHead> headManifest(
      Upstream upstream, RepositoryName name, Reference reference, List<String> accept) {
    return Mono.error(new UnsupportedOperationException("not used by the verifier"));
  }

  @Override
  public Mono<Long> headBlob(Upstream upstream, RepositoryName name, Digest digest) {
    return Mono.error(new UnsupportedOperationException("not used by the verifier"));
  }

  @Override
  public Mono<UpstreamTags> listTags(
      Upstream upstream, RepositoryName name, Integer n, String last) {
    return Mono.error(new UnsupportedOperationException("not used by the verifier"));
  }

  private static UpstreamException notFound(Upstream upstream, OciErrorCode code, String what) {
    return new UpstreamException(
        upstream.key(), code, HttpStatus.NOT_FOUND, what + " not found", null, null);
  }

  private static UpstreamException unavailable(Upstream upstream, String what) {
    return new UpstreamException(
        upstream.key(),
        OciErrorCode.UPSTREAM_UNAVAILABLE,
        HttpStatus.BAD_GATEWAY,
        what + ": upstream answered 500",
        null,
        null);
  }
}
