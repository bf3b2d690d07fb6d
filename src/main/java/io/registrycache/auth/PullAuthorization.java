package io.registrycache.auth;

import io.registrycache.config.AuthProperties;
import io.registrycache.config.RegistryCacheProperties;
import io.registrycache.oci.OciErrorCode;
import io.registrycache.oci.OciException;
import java.net.URI;
import java.util.function.Supplier;
import org.springframework.http.HttpStatus;
import org.springframework.stereotype.Component;

/**
 * Decides whether an identity may pull a repository of an upstream, once the request's form (bare,
 * in-path, {@code ns=}) has been resolved to the upstream and the canonical repository name, so no
 * form goes around a rule. Applies to every endpoint below {@code /v2/<name>/}: manifests, blobs,
 * tags list and referrers. Does nothing while {@code registry-cache.auth.enabled} is off.
 */
@Component
public class PullAuthorization {

  private final boolean enabled;
  private final AccessRules rules;
  private final PullAuthentication authentication;

  public PullAuthorization(RegistryCacheProperties properties, PullAuthentication authentication) {
    AuthProperties auth = properties.auth();
    this.enabled = auth.enabled();
    this.rules = new AccessRules(auth.rules(), auth.groups());
    this.authentication = authentication;
  }

  /**
   * Checks that {@code identity} may pull {@code repository} of the upstream {@code upstreamKey}.
   *
   * @throws AuthenticationRequired 401 {@code UNAUTHORIZED} with the challenge when an anonymous
   *     request is not allowed (credentials might allow it)
   * @throws OciException 403 {@code DENIED} when a user or robot is not allowed (OCI Distribution
   *     Spec v1.1, "Error Codes")
   */
  public void check(Identity identity, String upstreamKey, String repository) {
    check(identity, null, upstreamKey, repository, null);
  }

  /**
   * As {@link #check(Identity, String, String)}, for a request: a bearer token must grant {@code
   * pull} of {@code requestedName} (the name as the request's path has it) besides the rules
   * allowing the token's subject, else 401 with a challenge naming that scope, so the client asks
   * for a token for it.
   *
   * @param requestedName the repository as named in the request path (bare or in-path form)
   * @param requestUri the request's URI, for the challenge's realm
   */
  public void check(Identity identity, String requestedName, String upstreamKey, String repository, URI requestUri) {
    check(identity, requestedName, upstreamKey, repository, requestUri, false);
  }

  /**
   * As {@link #check(Identity, String, String, String, URI)}, knowing whether the upstream takes
   * each client's own credentials ({@code credentials: passthrough}): there an identity of kind
   * {@link Identity.Kind#PASSTHROUGH} is let through (the upstream decides, confirming each
   * repository with the client's credentials); anywhere else it is 401 {@code UNAUTHORIZED} with
   * the challenge, as its credentials are not the cache's. Users, robots and anonymous requests
   * follow the rules on either kind of upstream.
   *
   * @param passthrough whether the upstream {@code upstreamKey} is a pass-through upstream
   */
  public void check(
      Identity identity, String requestedName, String upstreamKey, String repository, URI requestUri,
      boolean passthrough) {
    checkRequest(identity, requestedName, upstreamKey, repository, requestUri == null ? null : () -> requestUri, passthrough);
  }

  /**
   * As {@link #check(Identity, String, String, String, URI, boolean)}, the request's URI made only
   * for a challenge ({@code null}: the Basic challenge).
   */
  public void checkRequest(
      Identity identity, String requestedName, String upstreamKey, String repository,
      Supplier<URI> requestUri, boolean passthrough) {
    if (!enabled) {
      return;
    }
    if (identity.pullable() != null && !identity.pullable().contains(requestedName)) {
      throw new AuthenticationRequired(authentication.challenge(requestUri == null ? null : requestUri.get(), requestedName),
          "the bearer token does not grant pull of '" + requestedName + "'");
    }
    if (allows(identity, upstreamKey, repository, passthrough)) {
      return;
    }
    if (identity.kind() == Identity.Kind.PASSTHROUGH) {
      throw new AuthenticationRequired(
          requestUri == null ? authentication.challenge() : authentication.challenge(requestUri.get(), requestedName),
          "invalid user name or password");
    }
    if (identity.anonymous()) {
      throw new AuthenticationRequired(
          requestUri == null ? authentication.challenge() : authentication.challenge(requestUri.get(), requestedName),
          "authentication required to pull '" + repository + "' of upstream '" + upstreamKey + "'");
    }
    throw new OciException(OciErrorCode.DENIED, HttpStatus.FORBIDDEN,
        identity + " may not pull '" + repository + "' of upstream '" + upstreamKey + "'");
  }

  /** Whether the rules let {@code identity} pull {@code repository} (canonical) of {@code upstreamKey}; true while auth is off. */
  public boolean allows(Identity identity, String upstreamKey, String repository) {
    return allows(identity, upstreamKey, repository, false);
  }

  /**
   * As {@link #allows(Identity, String, String)}: on a pass-through upstream ({@code passthrough})
   * a {@link Identity.Kind#PASSTHROUGH} identity is allowed, the upstream deciding.
   */
  public boolean allows(Identity identity, String upstreamKey, String repository, boolean passthrough) {
    if (!enabled) {
      return true;
    }
    if (identity.kind() == Identity.Kind.PASSTHROUGH) {
      return passthrough;
    }
    return rules.allows(identity, upstreamKey, repository);
  }
}
