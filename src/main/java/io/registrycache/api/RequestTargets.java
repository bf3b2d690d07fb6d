package io.registrycache.api;

import io.registrycache.auth.AuthenticationRequired;
import io.registrycache.auth.BasicCredentials;
import io.registrycache.auth.Identity;
import io.registrycache.auth.PullAuthentication;
import io.registrycache.auth.PullAuthorization;
import io.registrycache.oci.Digest;
import io.registrycache.oci.OciErrorCode;
import io.registrycache.oci.OciException;
import io.registrycache.oci.Reference;
import io.registrycache.proxy.PassthroughAccess;
import io.registrycache.upstream.ClientCredential;
import io.registrycache.upstream.Upstreams;
import java.net.URI;
import java.util.List;
import java.util.Optional;
import java.util.function.Function;
import java.util.function.Supplier;
import org.springframework.stereotype.Component;
import reactor.core.publisher.Mono;

/**
 * Which upstream and repository a request below {@code /v2/<name>/} is for, and whether its client
 * may pull it there: the step between the {@link PullGate} (who asks) and the answer, shared by
 * the pull route and WebFlux's routes.
 */
@Component
public class RequestTargets {

  private final Upstreams upstreams;
  private final PullAuthorization authorization;
  private final PullAuthentication authentication;
  private final PassthroughAccess passthrough;

  public RequestTargets(
      Upstreams upstreams, PullAuthorization authorization, PullAuthentication authentication,
      PassthroughAccess passthrough) {
    this.upstreams = upstreams;
    this.authorization = authorization;
    this.authentication = authentication;
    this.passthrough = passthrough;
  }

  /**
   * Resolves the request's target ({@link RequestTarget#resolve}), checks the rules for {@code
   * identity} and then the upstream's pull-through lists (so a client without the right learns
   * nothing of them), and serves it. For an upstream that takes each client's own credentials,
   * the upstream first confirms that they may pull this repository (or manifest, or blob) before
   * anything cached or in flight is served, and the target fetches with them.
   *
   * @param ns the {@code ns} query parameter, or {@code null}
   * @param clientAuthorization the request's {@code Authorization} values (empty when none)
   * @param requestUri the request's absolute URI, for a challenge's realm
   * @param serve the answer for the target
   * @return {@code serve}'s answer; errors with {@code NAME_INVALID} (400), {@code DENIED} (403),
   *     {@code NAME_UNKNOWN} (404), {@link AuthenticationRequired} (401) as {@link
   *     RequestTarget#resolve}, {@link PullAuthorization#check} and the pass-through decide, or
   *     with {@code serve}'s errors
   */
  public <T> Mono<T> serve(
      RegistryPath path, String ns, Identity identity, List<String> clientAuthorization,
      Supplier<URI> requestUri, Function<RequestTarget, Mono<T>> serve) {
    RequestTarget target = RequestTarget.resolve(path.rawName(), ns, upstreams);
    authorization.checkRequest(identity, path.rawName(), target.upstream().key(), target.name().value(),
        authentication.enabled() ? requestUri : null, target.upstream().passthrough());
    target.requirePullThrough();
    if (!target.upstream().passthrough()) {
      return serve.apply(target);
    }
    // A trusted external issuer's token holds no credentials for the upstream: it is asked anonymously.
    RequestTarget client = target.forClient(
        (identity.issuer() != null ? Optional.<BasicCredentials>empty()
            : authentication.passthroughCredentials(clientAuthorization))
        .map(c -> new ClientCredential(c.user(), c.password()))
        .orElse(ClientCredential.ANONYMOUS));
    PassthroughAccess.Probe probe = switch (path.endpoint()) {
      case MANIFEST -> new PassthroughAccess.Probe.Manifest(Reference.parse(path.reference()));
      case BLOB -> new PassthroughAccess.Probe.Blob(Digest.parse(path.reference()));
      default -> new PassthroughAccess.Probe.Repository();
    };
    return passthrough.confirm(client.upstream(), client.name(), probe)
        .then(Mono.defer(() -> serve.apply(client)))
        .onErrorMap(
            e -> e instanceof OciException oci && oci.code() == OciErrorCode.UNAUTHORIZED
                && !(e instanceof AuthenticationRequired),
            e -> new AuthenticationRequired(
                authentication.enabled()
                    ? authentication.challenge(requestUri.get(), path.rawName())
                    : authentication.challenge(),
                e.getMessage()));
  }
}
