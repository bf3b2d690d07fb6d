package io.registrycache.auth;

import io.registrycache.config.AuthProperties;
import io.registrycache.config.RegistryCacheProperties;
import io.registrycache.config.RepositoryGlob;
import io.registrycache.oci.OciErrorCode;
import io.registrycache.oci.OciException;
import io.registrycache.oci.RepositoryName;
import io.registrycache.proxy.PassthroughAccess;
import io.registrycache.upstream.ClientCredential;
import io.registrycache.upstream.Upstream;
import java.net.URI;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.function.Function;
import java.util.function.Supplier;
import java.util.stream.Collectors;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import org.springframework.http.HttpStatus;
import org.springframework.stereotype.Component;
import reactor.core.publisher.Mono;

/**
 * The one decision of the pull port: may this identity pull this repository of this upstream, and
 * with which credentials is the upstream asked. Made once per request below {@code /v2/<name>/},
 * after the request's form (bare, in-path, {@code ns=}) is resolved to the upstream and the
 * canonical repository name, so no form goes around it; the token endpoint asks the same question
 * for each scope it grants ({@link #grants}).
 *
 * <p>In order:
 *
 * <ol>
 *   <li>with {@code registry-cache.auth.enabled}: a token of the cache's token endpoint must grant
 *       {@code pull} of the repository as the request names it, else 401 with a challenge naming
 *       that scope; a pass-through identity may pull from pass-through upstreams only (401
 *       elsewhere); users, robots, issuer subjects and anonymous requests need a rule that allows
 *       them (anonymous: 401 with the challenge; others: 403 {@code DENIED});
 *   <li>the upstream's pull-through lists (auth on or off): 404 {@code NAME_UNKNOWN} when they
 *       refuse the name;
 *   <li>how the upstream is asked: with the cache's own credentials, or for a pass-through upstream
 *       ({@code credentials: passthrough}) with the client's own credentials, or anonymously for an
 *       issuer's subject or a client without credentials; there the upstream confirms, before
 *       anything cached or in flight is served ({@link PassthroughAccess}), and its 401 becomes the
 *       client's, with the cache's challenge.
 * </ol>
 *
 * <p>Rules are allow-only ({@code registry-cache.auth.rules}); a rule applies to an identity when
 * one of its subjects names it: {@code user:}, {@code robot:}, {@code jwt:<issuer-key>/} by kind
 * and name ({@link Identity#subject()}), {@code group:<group>} when {@code
 * registry-cache.auth.groups.<group>} lists that subject, {@code group:jwt:<issuer-key>/<group>}
 * when the issuer's token lists {@code <group>} in its groups claim, {@code authenticated} for
 * every user, robot and issuer subject, {@code anonymous} for requests without credentials, {@code
 * *} for all (the only subject that names a pass-through identity). With {@code
 * registry-cache.auth.legacy-identity-names}, names match as they did before kinds (see {@link
 * AuthProperties}).
 */
@Component
public class PullAccess {

  private static final Logger log = LoggerFactory.getLogger(PullAccess.class);

  private final boolean enabled;
  private final boolean legacyNames;
  private final List<AuthProperties.Rule> rules;

  /** Members (subjects, stripped) by group. */
  private final Map<String, Set<String>> groups;

  private final PullAuthentication authentication;
  private final PassthroughAccess passthrough;

  public PullAccess(
      RegistryCacheProperties properties,
      PullAuthentication authentication,
      PassthroughAccess passthrough) {
    AuthProperties auth = properties.auth();
    this.enabled = auth.enabled();
    this.legacyNames = auth.legacyIdentityNames();
    this.rules = auth.rules();
    this.groups =
        auth.groups().entrySet().stream()
            .collect(
                Collectors.toUnmodifiableMap(
                    Map.Entry::getKey,
                    e ->
                        e.getValue().stream()
                            .map(String::strip)
                            .collect(Collectors.toUnmodifiableSet())));
    this.authentication = authentication;
    this.passthrough = passthrough;
    if (enabled && legacyNames) {
      log.warn(
          "registry-cache.auth.legacy-identity-names is on: user:<name> also names every trusted issuer's subject"
              + " <name>, bare group members name any kind, and group:<group> takes issuers' groups claims. This setting goes"
              + " in the next release: name issuer subjects jwt:<issuer-key>/<subject> (docs/security.md)");
    }
  }

  /** Whether access rules apply ({@code registry-cache.auth.enabled}). */
  public boolean enabled() {
    return enabled;
  }

  /**
   * Decides a request and, when it may be served, serves it.
   *
   * @param identity who asks ({@link PullAuthentication})
   * @param requestedName the repository as the request's path names it (bare or in-path form)
   * @param upstream the upstream the request resolved to
   * @param name the canonical repository name at that upstream
   * @param probe what the request reads, for a pass-through upstream's confirmation; asked for only
   *     there
   * @param authorization the request's {@code Authorization} values, read ({@link
   *     PullAuthentication#passthroughCredentials}) only for a pass-through upstream
   * @param requestUri the request's absolute URI, for a {@code Bearer} challenge's realm
   * @param serve the answer, given the upstream to fetch with ({@code upstream} itself, or {@link
   *     Upstream#forClient} of the client's credentials)
   * @return {@code serve}'s answer; errors with {@link AuthenticationRequired} (401), {@code
   *     DENIED} (403), {@code NAME_UNKNOWN} (404), or a pass-through upstream's refusal or failure
   */
  public <T> Mono<T> decide(
      Identity identity,
      String requestedName,
      Upstream upstream,
      RepositoryName name,
      Supplier<PassthroughAccess.Probe> probe,
      List<String> authorization,
      Supplier<URI> requestUri,
      Function<Upstream, Mono<T>> serve) {
    OciException refused = refusal(identity, requestedName, upstream, name, requestUri);
    if (refused != null) {
      return Mono.error(refused);
    }
    if (!upstream.passthrough()) {
      return serve.apply(upstream);
    }
    ClientCredential credential;
    try {
      // An issuer's token holds no credentials for the upstream: it is asked anonymously.
      credential =
          identity.kind() == Identity.Kind.ISSUER
              ? ClientCredential.ANONYMOUS
              : authentication
                  .passthroughCredentials(authorization)
                  .map(c -> new ClientCredential(c.user(), c.password()))
                  .orElse(ClientCredential.ANONYMOUS);
    } catch (AuthenticationRequired e) {
      return Mono.error(e);
    }
    Upstream client = upstream.forClient(credential);
    return passthrough
        .confirm(client, name, probe.get())
        .then(Mono.defer(() -> serve.apply(client)))
        .onErrorMap(
            e ->
                e instanceof OciException oci
                    && oci.code() == OciErrorCode.UNAUTHORIZED
                    && !(e instanceof AuthenticationRequired),
            e ->
                new AuthenticationRequired(
                    authentication.challenge(requestUri, requestedName), e.getMessage()));
  }

  /**
   * Whether a token of the token endpoint may grant {@code identity} {@code pull} of {@code name}
   * of {@code upstream}: the same decision as {@link #decide}, without a request (so no
   * confirmation of a pass-through upstream, which comes when the token is used).
   */
  public boolean grants(Identity identity, Upstream upstream, RepositoryName name) {
    return refusal(identity, null, upstream, name, null) == null;
  }

  /** Why the request is refused, or {@code null} when it is allowed. */
  private OciException refusal(
      Identity identity,
      String requestedName,
      Upstream upstream,
      RepositoryName name,
      Supplier<URI> requestUri) {
    if (enabled) {
      if (identity.pullable() != null
          && requestedName != null
          && !identity.pullable().contains(requestedName)) {
        return new AuthenticationRequired(
            authentication.challenge(requestUri, requestedName),
            "the bearer token does not grant pull of '" + requestedName + "'");
      }
      if (identity.kind() == Identity.Kind.PASSTHROUGH) {
        if (!upstream.passthrough()) {
          return new AuthenticationRequired(
              authentication.challenge(requestUri, requestedName), "invalid user name or password");
        }
      } else if (!rulesAllow(identity, upstream.key(), name.value())) {
        return identity.anonymous()
            ? new AuthenticationRequired(
                authentication.challenge(requestUri, requestedName),
                "authentication required to pull '"
                    + name.value()
                    + "' of upstream '"
                    + upstream.key()
                    + "'")
            : new OciException(
                OciErrorCode.DENIED,
                HttpStatus.FORBIDDEN,
                identity
                    + " may not pull '"
                    + name.value()
                    + "' of upstream '"
                    + upstream.key()
                    + "'");
      }
    }
    try {
      upstream.requirePullThrough(name);
    } catch (OciException e) {
      return e;
    }
    return null;
  }

  private boolean rulesAllow(Identity identity, String upstreamKey, String repository) {
    for (AuthProperties.Rule rule : rules) {
      if (appliesTo(rule, identity)
          && (rule.upstreams().contains("*") || rule.upstreams().contains(upstreamKey))
          && RepositoryGlob.anyMatches(rule.repositories(), repository)) {
        return true;
      }
    }
    return false;
  }

  private boolean appliesTo(AuthProperties.Rule rule, Identity identity) {
    for (String subject : rule.subjects()) {
      if (subject.equals("*")) {
        return true;
      }
      if (identity.kind() == Identity.Kind.PASSTHROUGH) {
        continue; // known to an upstream only: no rule but '*' can name it
      }
      if (identity.anonymous()) {
        if (subject.equals("anonymous")) {
          return true;
        }
        continue;
      }
      if (subject.equals("authenticated") || subject.equals(identity.subject())) {
        return true;
      }
      if (legacyNames
          && identity.kind() == Identity.Kind.ISSUER
          && subject.equals("user:" + identity.name())) {
        return true;
      }
      if (subject.startsWith("group:") && inGroup(identity, subject.substring("group:".length()))) {
        return true;
      }
    }
    return false;
  }

  private boolean inGroup(Identity identity, String group) {
    if (identity.kind() == Identity.Kind.ISSUER) {
      String prefix = "jwt:" + identity.issuer() + "/";
      if (group.startsWith(prefix)
          && identity.groups().contains(group.substring(prefix.length()))) {
        return true;
      }
      if (legacyNames && identity.groups().contains(group)) {
        return true;
      }
    }
    Set<String> members = groups.get(group);
    return members != null
        && (members.contains(identity.subject())
            || (legacyNames && members.contains(identity.name())));
  }
}
