package io.registrycache.cluster;

/**
 * The replicas' internal blob protocol (version 1), on each replica's {@code cluster.peer-port},
 * never on the pull port:
 *
 * <pre>
 * GET /internal/v1/blobs/&lt;upstream-key&gt;/&lt;repository&gt;/&lt;digest&gt;
 * Authorization: Bearer &lt;registry-cache.cluster.token&gt;
 * </pre>
 *
 * The upstream key is one percent-encoded path segment; the repository is the canonical name at
 * that upstream (slashes kept); the digest is {@code algorithm:hex}. The owner answers by its own
 * pull-through of that blob: 200 with the bytes as they arrive ({@code Content-Length} when known,
 * {@code Docker-Content-Digest}), or an OCI error body with the status its pull-through gave; 401
 * for a missing or wrong token. Every answer of the endpoint carries {@value #HEADER}{@code : 1},
 * which tells an owner's "no such blob upstream" (404 with the header) from a path this replica
 * does not serve (404 without it).
 */
public final class PeerProtocol {

  /** Path prefix of blob requests. */
  public static final String BLOBS = "/internal/v1/blobs/";

  /** Response header on every answer of the peer endpoint; value {@code 1}, the version. */
  public static final String HEADER = "Registry-Cache-Peer";

  private PeerProtocol() {}
}
