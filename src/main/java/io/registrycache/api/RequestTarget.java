package io.registrycache.api;

import io.registrycache.oci.OciErrorCode;
import io.registrycache.oci.OciException;
import io.registrycache.oci.RepositoryName;
import io.registrycache.upstream.ClientCredential;
import io.registrycache.upstream.Upstream;
import io.registrycache.upstream.Upstreams;
import java.util.regex.Pattern;

/**
 * Which upstream and repository a request is for. Three forms are understood at once:
 *
 * <ol>
 *   <li>containerd mirror form, {@code /v2/<name>/...?ns=<registry-host>}: containerd appends
 *       {@code ns} to every request to a mirror (containerd {@code docs/hosts.md});
 *   <li>in-path form, {@code /v2/<registry-host>/<name>/...}, where the first component contains
 *       a {@code .} or a {@code :} or is {@code localhost} (Docker's rule for telling a registry
 *       host from a repository component);
 *   <li>bare form, {@code /v2/<name>/...}: the configured default upstream.
 * </ol>
 *
 * @param upstream the upstream to pull from
 * @param name the repository name at that upstream, canonical (Docker Hub naming applied)
 * @param namespace the {@code ns} parameter when the request had one, else {@code null}
 */
public record RequestTarget(Upstream upstream, RepositoryName name, String namespace) {

  /** host[:port], host being a DNS name, IPv4 or bracketed IPv6 address. */
  private static final Pattern HOST =
      Pattern.compile("(?:[a-zA-Z0-9](?:[a-zA-Z0-9-]{0,61}[a-zA-Z0-9])?(?:\\.[a-zA-Z0-9](?:[a-zA-Z0-9-]{0,61}[a-zA-Z0-9])?)*|\\[[0-9a-fA-F:.]+\\])(?::[0-9]{1,5})?");

  /**
   * Resolves the target of a request.
   *
   * @param rawName the repository part of the path, e.g. {@code localhost:5000/library/alpine}
   * @param ns the {@code ns} query parameter, or {@code null}
   * @throws OciException {@code NAME_INVALID} (400) for a malformed name or host, {@code DENIED}
   *     (403) for a registry host this cache does not serve
   */
  public static RequestTarget resolve(String rawName, String ns, Upstreams upstreams) {
    if (ns != null) {
      requireHost(ns);
      Upstream upstream = upstreams.forHost(ns);
      return new RequestTarget(upstream, upstream.canonical(RepositoryName.parse(rawName)), ns);
    }
    int slash = rawName.indexOf('/');
    if (slash > 0) {
      String first = rawName.substring(0, slash);
      if (first.contains(".") || first.contains(":") || first.equals("localhost")) {
        requireHost(first);
        Upstream upstream = upstreams.forHost(first);
        String rest = rawName.substring(slash + 1);
        return new RequestTarget(upstream, upstream.canonical(RepositoryName.parse(rest)), null);
      }
    }
    Upstream upstream = upstreams.defaultUpstream();
    return new RequestTarget(upstream, upstream.canonical(RepositoryName.parse(rawName)), null);
  }

  /**
   * This target, once its upstream's pull-through lists permit its repository ({@code
   * registry-cache.upstreams.<key>.pull-through}).
   *
   * @throws OciException 404 {@code NAME_UNKNOWN} when they do not
   */
  public RequestTarget requirePullThrough() {
    upstream.requirePullThrough(name);
    return this;
  }

  /**
   * This target, fetched with {@code credential} when its upstream takes each client's own
   * credentials ({@link Upstream#forClient}); else this target.
   */
  public RequestTarget forClient(ClientCredential credential) {
    Upstream client = upstream.forClient(credential);
    return client == upstream ? this : new RequestTarget(client, name, namespace);
  }

  /**
   * Whether {@code host} is {@code host[:port]} with a DNS name, IPv4 or bracketed IPv6 address
   * and at most 5 port digits, 255 characters in all.
   */
  static boolean validHost(String host) {
    return host.length() <= 255 && HOST.matcher(host).matches();
  }

  private static void requireHost(String host) {
    if (!validHost(host)) {
      throw new OciException(OciErrorCode.NAME_INVALID, "invalid registry host '" + host + "'");
    }
  }
}
