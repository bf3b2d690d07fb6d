package com.google.cloud.tools.jib.registry;

import com.google.cloud.tools.jib.api.RegistryAuthenticationFailedException;
import com.google.cloud.tools.jib.http.FailoverHttpClient;
import java.util.Optional;

/**
 * Bridge to jib-core's package-private {@code RegistryAuthenticator.fromAuthenticationMethod} and
 * {@code RegistryEndpointRequestProperties}, so that registry-cache obtains pull authorizations
 * exactly the way jib does (Docker Registry token authentication, "How to authenticate").
 *
 * <p>This class lives in jib's package (a split package): it works on the class path only, and is
 * pinned to jib-core 0.28.1; {@code JibPullAuthenticatorTest} fails if jib changes the signatures
 * or the behaviour. See {@code docs/jib-core.md}.
 */
public final class JibPullAuthenticator {

  private JibPullAuthenticator() {}

  /**
   * An authenticator for a {@code WWW-Authenticate} challenge of a registry.
   *
   * @param wwwAuthenticate the challenge as the registry sent it (RFC 9110 section 11.6.1)
   * @param serverUrl the registry as jib names it ({@code host[:port]}); used as {@code service}
   *     when the challenge has none, and in error messages
   * @param repository the repository the pull scope is requested for ({@code repository:<name>:pull})
   * @param userAgent {@code User-Agent} of the token request
   * @param httpClient client for the token request (blocking)
   * @return empty for a {@code Basic} challenge (no token exchange; send basic credentials)
   * @throws RegistryAuthenticationFailedException when the challenge is neither Basic nor a Bearer
   *     challenge with a {@code realm}
   */
  public static Optional<RegistryAuthenticator> forChallenge(
      String wwwAuthenticate,
      String serverUrl,
      String repository,
      String userAgent,
      FailoverHttpClient httpClient)
      throws RegistryAuthenticationFailedException {
    return RegistryAuthenticator.fromAuthenticationMethod(
        wwwAuthenticate,
        new RegistryEndpointRequestProperties(serverUrl, repository),
        userAgent,
        httpClient);
  }
}
