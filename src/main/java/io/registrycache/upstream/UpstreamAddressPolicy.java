package io.registrycache.upstream;

import io.netty.handler.ipfilter.IpFilterRuleType;
import io.netty.handler.ipfilter.IpSubnetFilterRule;
import io.netty.resolver.AbstractAddressResolver;
import io.netty.resolver.AddressResolver;
import io.netty.resolver.AddressResolverGroup;
import io.netty.util.concurrent.EventExecutor;
import io.netty.util.concurrent.Future;
import io.netty.util.concurrent.Promise;
import io.registrycache.oci.OciErrorCode;
import java.io.IOException;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.NetworkInterface;
import java.net.SocketException;
import java.net.URI;
import java.net.UnknownHostException;
import java.util.Collection;
import java.util.List;
import java.util.Locale;
import java.util.Set;
import java.util.function.Supplier;
import org.springframework.http.HttpStatus;
import reactor.core.publisher.Mono;
import reactor.core.scheduler.Schedulers;

/**
 * Where an upstream may send the cache: the targets of its redirects and of its token realms.
 *
 * <p>The upstream's own origin (scheme, host, port of its {@code url}) is always allowed. Any other
 * target must be http or https; its host is resolved and refused when an address is loopback,
 * link-local, any-local, multicast or private (10/8, 172.16/12, 192.168/16, fc00::/7), unless the
 * host name or a matching address/CIDR is in {@code redirect.allowed-hosts}; a local address on one
 * of the cache's own ports is always refused.
 *
 * <p>Checked twice: {@link #check} before each redirect or token request (clear messages, also for
 * IP literals, which are never resolved), and {@link #resolverGroup} on the addresses the
 * connection is actually made to (against DNS rebinding).
 */
final class UpstreamAddressPolicy {

  /** Allows everything but the scheme check; for clients built without a Spring context. */
  static final UpstreamAddressPolicy NO_OWN_PORTS = new UpstreamAddressPolicy(Set::of);

  private final Supplier<Collection<Integer>> ownPorts;

  /**
   * @param ownPorts the cache's own server and management ports, read at each check
   */
  UpstreamAddressPolicy(Supplier<Collection<Integer>> ownPorts) {
    this.ownPorts = ownPorts;
  }

  /**
   * Completes empty when {@code target} may be requested for {@code upstream}.
   *
   * @param what {@code redirect} or {@code token realm}, for the message
   * @return an error {@link UpstreamException} {@code UPSTREAM_UNAVAILABLE} (502) naming the
   *     upstream and the target when refused
   */
  Mono<Void> check(Upstream upstream, URI target, String what) {
    String scheme = target.getScheme() == null ? "" : target.getScheme().toLowerCase(Locale.ROOT);
    if (!scheme.equals("http") && !scheme.equals("https")) {
      return Mono.error(refused(upstream, target, what, "scheme is not http or https"));
    }
    if (target.getHost() == null) {
      return Mono.error(refused(upstream, target, what, "no host"));
    }
    if (sameOrigin(target, upstream.url())) {
      return Mono.empty();
    }
    return Mono.fromCallable(() -> verdict(upstream, target))
        .subscribeOn(Schedulers.boundedElastic()) // name resolution blocks
        .flatMap(
            why ->
                why.isEmpty()
                    ? Mono.<Void>empty()
                    : Mono.<Void>error(refused(upstream, target, what, why)));
  }

  /** Empty when allowed, else why not. */
  private String verdict(Upstream upstream, URI target) {
    String host = stripBrackets(target.getHost()).toLowerCase(Locale.ROOT);
    InetAddress[] addresses;
    try {
      addresses = InetAddress.getAllByName(host);
    } catch (UnknownHostException e) {
      return "unknown host";
    }
    for (InetAddress address : addresses) {
      String why = addressVerdict(upstream, host, port(target), address);
      if (!why.isEmpty()) {
        return why;
      }
    }
    return "";
  }

  /**
   * Empty when {@code host} (another origin than the upstream's) may be reached at {@code address}.
   */
  private String addressVerdict(Upstream upstream, String host, int port, InetAddress address) {
    if (ownPorts.get().contains(port) && isLocal(address)) {
      return "it is this cache's own port " + port;
    }
    List<String> allowed = upstream.settings().redirect().allowedHosts();
    if (allowed.stream().anyMatch(a -> a.equalsIgnoreCase(host) || matches(a, address))) {
      return "";
    }
    String kind = restrictedKind(address);
    return kind == null
        ? ""
        : host
            + " resolves to "
            + kind
            + " address "
            + address.getHostAddress()
            + " (allow it with registry-cache.upstreams."
            + upstream.key()
            + ".redirect.allowed-hosts)";
  }

  /**
   * A Netty resolver group for the connections of {@code upstream} that applies this policy to the
   * addresses actually connected to, so a name that resolved to a public address for {@link #check}
   * and to a private one now (DNS rebinding) is still refused. The upstream's own host and port are
   * not checked. Names are resolved by {@code delegate}.
   */
  AddressResolverGroup<InetSocketAddress> resolverGroup(
      Upstream upstream, AddressResolverGroup<?> delegate) {
    String ownHost = stripBrackets(upstream.url().getHost());
    int ownPort = port(upstream.url());
    return new AddressResolverGroup<>() {
      @Override
      @SuppressWarnings("unchecked")
      protected AddressResolver<InetSocketAddress> newResolver(EventExecutor executor) {
        AddressResolver<InetSocketAddress> inner =
            (AddressResolver<InetSocketAddress>) delegate.getResolver(executor);
        return new AbstractAddressResolver<>(executor, InetSocketAddress.class) {
          @Override
          protected boolean doIsResolved(InetSocketAddress address) {
            return !address.isUnresolved();
          }

          @Override
          protected void doResolve(
              InetSocketAddress unresolved, Promise<InetSocketAddress> promise) {
            inner
                .resolve(unresolved)
                .addListener(
                    (Future<InetSocketAddress> f) -> {
                      if (!f.isSuccess()) {
                        promise.tryFailure(f.cause());
                        return;
                      }
                      Refused refused = refusal(unresolved, List.of(f.getNow()));
                      if (refused == null) {
                        promise.trySuccess(f.getNow());
                      } else {
                        promise.tryFailure(refused);
                      }
                    });
          }

          @Override
          protected void doResolveAll(
              InetSocketAddress unresolved, Promise<List<InetSocketAddress>> promise) {
            inner
                .resolveAll(unresolved)
                .addListener(
                    (Future<List<InetSocketAddress>> f) -> {
                      if (!f.isSuccess()) {
                        promise.tryFailure(f.cause());
                        return;
                      }
                      Refused refused = refusal(unresolved, f.getNow());
                      if (refused == null) {
                        promise.trySuccess(f.getNow());
                      } else {
                        promise.tryFailure(refused);
                      }
                    });
          }
        };
      }

      private Refused refusal(InetSocketAddress unresolved, List<InetSocketAddress> resolved) {
        String host = stripBrackets(unresolved.getHostString()).toLowerCase(Locale.ROOT);
        if (host.equalsIgnoreCase(ownHost) && unresolved.getPort() == ownPort) {
          return null;
        }
        for (InetSocketAddress address : resolved) {
          String why = addressVerdict(upstream, host, unresolved.getPort(), address.getAddress());
          if (!why.isEmpty()) {
            return new Refused(
                new UpstreamException(
                    upstream.key(),
                    OciErrorCode.UPSTREAM_UNAVAILABLE,
                    HttpStatus.BAD_GATEWAY,
                    UpstreamErrors.name(upstream)
                        + ": connection to "
                        + host
                        + ":"
                        + unresolved.getPort()
                        + " refused: "
                        + why,
                    null,
                    null));
          }
        }
        return null;
      }
    };
  }

  /** A connection refused by the policy at resolution time; carries the error to report. */
  static final class Refused extends IOException {
    final UpstreamException error;

    Refused(UpstreamException error) {
      super(error.getMessage());
      this.error = error;
    }
  }

  /** The kind of a loopback, link-local, any-local, multicast or private address, else null. */
  static String restrictedKind(InetAddress a) {
    if (a.isLoopbackAddress()) {
      return "a loopback";
    }
    if (a.isAnyLocalAddress()) {
      return "an any-local";
    }
    if (a.isLinkLocalAddress()) {
      return "a link-local";
    }
    if (a.isMulticastAddress()) {
      return "a multicast";
    }
    if (a.isSiteLocalAddress()
        || (a.getAddress().length == 16 && (a.getAddress()[0] & 0xfe) == 0xfc)) {
      return "a private";
    }
    return null;
  }

  private static boolean isLocal(InetAddress a) {
    if (a.isLoopbackAddress() || a.isAnyLocalAddress()) {
      return true;
    }
    try {
      return NetworkInterface.getByInetAddress(a) != null;
    } catch (SocketException e) {
      return false;
    }
  }

  /**
   * Whether {@code allowed} is an IP address or CIDR range holding {@code address} (Netty's {@link
   * IpSubnetFilterRule}); a host name, a prefix out of range ({@code /-1}, {@code /33} for IPv4) or
   * another address family holds nothing.
   */
  static boolean matches(String allowed, InetAddress address) {
    String[] parts = allowed.trim().split("/", 2);
    String literal = stripBrackets(parts[0]);
    if (!literal.contains(":") && !literal.matches("[0-9.]+")) {
      return false; // a host name: compared by name only, never resolved here
    }
    try {
      InetAddress network = InetAddress.getByName(literal);
      int max = network.getAddress().length * 8;
      int bits = parts.length == 2 ? Integer.parseInt(parts[1].trim()) : max;
      if (bits < 0 || bits > max || network.getAddress().length != address.getAddress().length) {
        return false;
      }
      return new IpSubnetFilterRule(network, bits, IpFilterRuleType.ACCEPT)
          .matches(new InetSocketAddress(address, 0));
    } catch (UnknownHostException | IllegalArgumentException e) {
      return false;
    }
  }

  private static UpstreamException refused(Upstream upstream, URI target, String what, String why) {
    return new UpstreamException(
        upstream.key(),
        OciErrorCode.UPSTREAM_UNAVAILABLE,
        HttpStatus.BAD_GATEWAY,
        UpstreamErrors.name(upstream) + ": " + what + " to " + origin(target) + " refused: " + why,
        null,
        null);
  }

  /** Scheme, host and port only: a redirect's query may hold a signature. */
  static String origin(URI uri) {
    return uri.getScheme()
        + "://"
        + uri.getHost()
        + (uri.getPort() >= 0 ? ":" + uri.getPort() : "");
  }

  static boolean sameOrigin(URI a, URI b) {
    return a.getScheme() != null
        && a.getScheme().equalsIgnoreCase(b.getScheme())
        && a.getHost() != null
        && a.getHost().equalsIgnoreCase(b.getHost())
        && port(a) == port(b);
  }

  static int port(URI uri) {
    if (uri.getPort() >= 0) {
      return uri.getPort();
    }
    return "https".equalsIgnoreCase(uri.getScheme()) ? 443 : 80;
  }

  private static String stripBrackets(String host) {
    return host.startsWith("[") && host.endsWith("]") ? host.substring(1, host.length() - 1) : host;
  }
}
