package io.registrycache.api;

import io.registrycache.oci.OciErrorCode;
import io.registrycache.oci.OciException;
import io.registrycache.oci.RepositoryName;
import io.registrycache.upstream.ClientCredential;
import io.registrycache.upstream.Upstream;
import io.registrycache.upstream.Upstreams;

/**
 * Which upstream and repository a request is for. Three forms are understood at once:
 *
 * <ol>
 *   <li>containerd mirror form, {@code /v2/<name>/...?ns=<registry-host>}: containerd appends
 *       {@code ns} to every request to a mirror (containerd {@code docs/hosts.md});
 *   <li>in-path form, {@code /v2/<registry-host>/<name>/...}, where the first component contains a
 *       {@code .} or a {@code :} or is {@code localhost} (Docker's rule for telling a registry host
 *       from a repository component);
 *   <li>bare form, {@code /v2/<name>/...}: the configured default upstream.
 * </ol>
 *
 * @param upstream the upstream to pull from
 * @param name the repository name at that upstream, canonical (Docker Hub naming applied)
 * @param namespace the {@code ns} parameter when the request had one, else {@code null}
 */
public record RequestTarget(Upstream upstream, RepositoryName name, String namespace) {

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
   * This target, fetched with {@code credential} when its upstream takes each client's own
   * credentials ({@link Upstream#forClient}); else this target.
   */
  @SuppressWarnings("ReferenceEquality") // forClient gives back the same upstream if unchanged
  public RequestTarget forClient(ClientCredential credential) {
    Upstream client = upstream.forClient(credential);
    return client == upstream ? this : new RequestTarget(client, name, namespace);
  }

  /**
   * Whether {@code host} is {@code host[:port]} with a DNS name, IPv4 or bracketed IPv6 address and
   * at most 5 port digits, 255 characters in all: exactly the strings the regular expression {@code
   * (?:L(?:\\.L)*|\\[[0-9a-fA-F:.]+\\])(?::[0-9]{1,5})?}, with {@code L} = {@code
   * [a-zA-Z0-9](?:[a-zA-Z0-9-]{0,61}[a-zA-Z0-9])?}, matches (ASCII only), found by one scan (a
   * regular expression match per request cost 0.8 % of a cold pull's CPU).
   */
  static boolean validHost(String host) {
    int n = host.length();
    if (n == 0 || n > 255) {
      return false;
    }
    int i = 0;
    if (host.charAt(0) == '[') {
      i = 1;
      while (i < n && isAddressChar(host.charAt(i))) {
        i++;
      }
      if (i == 1 || i == n || host.charAt(i) != ']') {
        return false;
      }
      i++;
    } else {
      while (true) { // one label: 1 to 63 letters, digits and '-', not starting or ending with '-'
        int start = i;
        while (i < n && isLabelChar(host.charAt(i))) {
          i++;
        }
        if (i == start
            || i - start > 63
            || host.charAt(start) == '-'
            || host.charAt(i - 1) == '-') {
          return false;
        }
        if (i < n && host.charAt(i) == '.') {
          i++;
        } else {
          break;
        }
      }
    }
    if (i == n) {
      return true;
    }
    int digits = n - i - 1;
    if (host.charAt(i) != ':' || digits < 1 || digits > 5) {
      return false;
    }
    for (int j = i + 1; j < n; j++) {
      if (!isDigit(host.charAt(j))) {
        return false;
      }
    }
    return true;
  }

  private static void requireHost(String host) {
    if (!validHost(host)) {
      throw new OciException(OciErrorCode.NAME_INVALID, "invalid registry host '" + host + "'");
    }
  }

  private static boolean isDigit(char c) {
    return c >= '0' && c <= '9';
  }

  private static boolean isLetterOrDigit(char c) {
    return isDigit(c) || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
  }

  private static boolean isLabelChar(char c) {
    return isLetterOrDigit(c) || c == '-';
  }

  private static boolean isAddressChar(char c) {
    return isDigit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F') || c == ':' || c == '.';
  }
}
