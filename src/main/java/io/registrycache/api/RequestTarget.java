package io.registrycache.api;

import io.registrycache.auth.AuthenticationRequired;
import io.registrycache.auth.Identity;
import io.registrycache.auth.PullAccess;
import io.registrycache.oci.Digest;
import io.registrycache.oci.OciErrorCode;
import io.registrycache.oci.OciException;
import io.registrycache.oci.Reference;
import io.registrycache.oci.RepositoryName;
import io.registrycache.proxy.PassthroughAccess;
import io.registrycache.upstream.ClientCredential;
import io.registrycache.upstream.Upstream;
import io.registrycache.upstream.Upstreams;
import java.net.URI;
import java.util.List;
import java.util.function.Function;
import java.util.function.Supplier;
import org.springframework.stereotype.Component;
import reactor.core.publisher.Mono;

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
 * <p>{@link Resolver} resolves a request's target and has {@link PullAccess} decide whether its
 * client may pull it there: the step between the {@link PullGate} (who asks) and the answer, shared
 * by the pull route and WebFlux's routes.
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

  /**
   * Which upstream and repository a request below {@code /v2/<name>/} is for, and whether its
   * client may pull it there; the second half is the one decision of {@link PullAccess}.
   */
  @Component
  public static class Resolver {

    private final Upstreams upstreams;
    private final PullAccess access;

    /**
     * {@code registry-cache.auth.enabled}, read once. Off, a request to an upstream that is not
     * pass-through is decided here by the upstream's pull-through list alone, as {@link PullAccess}
     * would decide it, without entering the auth classes.
     */
    private final boolean accessRules;

    public Resolver(Upstreams upstreams, PullAccess access) {
      this.upstreams = upstreams;
      this.access = access;
      this.accessRules = access.enabled();
    }

    /**
     * Resolves the request's target ({@link RequestTarget#resolve}), has {@link PullAccess#decide}
     * decide whether {@code identity} may pull it and with which credentials the upstream is asked,
     * and serves it.
     *
     * @param ns the {@code ns} query parameter, or {@code null}
     * @param clientAuthorization the request's {@code Authorization} values (empty when none), read
     *     only for a pass-through upstream
     * @param requestUri the request's absolute URI, for a challenge's realm
     * @param serve the answer for the target
     * @return {@code serve}'s answer; errors with {@code NAME_INVALID} (400), {@code DENIED} (403),
     *     {@code NAME_UNKNOWN} (404), {@link AuthenticationRequired} (401) as {@link
     *     RequestTarget#resolve} and {@link PullAccess#decide} decide, or with {@code serve}'s
     *     errors
     */
    @SuppressWarnings("ReferenceEquality") // the decision hands back the target's own upstream
    public <T> Mono<T> serve(
        RegistryPath path,
        String ns,
        Identity identity,
        List<String> clientAuthorization,
        Supplier<URI> requestUri,
        Function<RequestTarget, Mono<T>> serve) {
      RequestTarget target = RequestTarget.resolve(path.rawName(), ns, upstreams);
      if (!accessRules && !target.upstream().passthrough()) {
        try {
          target.upstream().requirePullThrough(target.name());
        } catch (OciException refused) {
          return Mono.error(refused);
        }
        return serve.apply(target);
      }
      return access.decide(
          identity,
          path.rawName(),
          target.upstream(),
          target.name(),
          () -> probe(path),
          clientAuthorization,
          requestUri,
          upstream ->
              serve.apply(
                  upstream == target.upstream()
                      ? target
                      : new RequestTarget(upstream, target.name(), target.namespace())));
    }

    private static PassthroughAccess.Probe probe(RegistryPath path) {
      return switch (path.endpoint()) {
        case MANIFEST -> new PassthroughAccess.Probe.Manifest(Reference.parse(path.reference()));
        case BLOB -> new PassthroughAccess.Probe.Blob(Digest.parse(path.reference()));
        default -> new PassthroughAccess.Probe.Repository();
      };
    }
  }
}
