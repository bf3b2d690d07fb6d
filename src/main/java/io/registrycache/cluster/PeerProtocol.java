package io.registrycache.cluster;

/**
 * The replicas' internal protocol (version 1), on each replica's {@code cluster.peer-port}, never
 * on the pull port:
 *
 * <pre>
 * GET /internal/v1/blobs/&lt;upstream-key&gt;/&lt;repository&gt;/&lt;digest&gt;
 * GET /internal/v1/manifests/&lt;upstream-key&gt;/&lt;repository&gt;/&lt;tag or digest&gt;
 * GET /internal/v1/ping
 * Authorization: Bearer &lt;registry-cache.cluster.token&gt;
 * </pre>
 *
 * The upstream key is one percent-encoded path segment; the repository is the canonical name at
 * that upstream (slashes kept); the digest is {@code algorithm:hex}. The owner answers by its own
 * pull-through of that blob or manifest: 200 with the bytes as they arrive ({@code Content-Length}
 * when known, {@code Docker-Content-Digest}; for a manifest {@code Content-Type} is its media type,
 * every media type is accepted, and a tag is as fresh as the owner's {@code tag-ttl} allows), or an
 * OCI error body with the status its pull-through gave; 401 for a missing or wrong token. Every
 * answer of the endpoint carries {@value #HEADER}{@code : 1}, which tells an owner's "no such blob
 * or manifest upstream" (404 with the header) from a path this replica does not serve (404 without
 * it). {@code ping} is a liveness probe, answered 204 at once without touching the store or the
 * upstream; the asking replica takes any HTTP answer (even an older replica's 404) as a sign of
 * life.
 */
public final class PeerProtocol {

  /** Path prefix of blob requests. */
  public static final String BLOBS = "/internal/v1/blobs/";

  /** Path prefix of manifest requests: {@code <upstream-key>/<repository>/<tag or digest>}. */
  public static final String MANIFESTS = "/internal/v1/manifests/";

  /** The liveness probe: {@code GET}, answered 204 with {@value #HEADER}. */
  public static final String PING = "/internal/v1/ping";

  /** Response header on every answer of the peer endpoint; value {@code 1}, the version. */
  public static final String HEADER = "Registry-Cache-Peer";

  private PeerProtocol() {}
}
