package io.registrycache.api;

import io.registrycache.auth.AuthenticationRequired;
import io.registrycache.auth.Identity;
import io.registrycache.auth.PullAccess;
import io.registrycache.oci.Digest;
import io.registrycache.oci.OciException;
import io.registrycache.oci.Reference;
import io.registrycache.proxy.PassthroughAccess;
import io.registrycache.upstream.Upstreams;
import java.net.URI;
import java.util.List;
import java.util.function.Function;
import java.util.function.Supplier;
import org.springframework.stereotype.Component;
import reactor.core.publisher.Mono;

/**
 * Which upstream and repository a request below {@code /v2/<name>/} is for, and whether its client
 * may pull it there: the step between the {@link PullGate} (who asks) and the answer, shared by the
 * pull route and WebFlux's routes. The second half is the one decision of {@link PullAccess}.
 */
@Component
public class RequestTargets {

  private final Upstreams upstreams;
  private final PullAccess access;

  /**
   * {@code registry-cache.auth.enabled}, read once. Off, a request to an upstream that is not
   * pass-through is decided here by the upstream's pull-through list alone, as {@link PullAccess}
   * would decide it, without entering the auth classes.
   */
  private final boolean accessRules;

  public RequestTargets(Upstreams upstreams, PullAccess access) {
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
   *     RequestTarget#resolve} and {@link PullAccess#decide} decide, or with {@code serve}'s errors
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
