package io.registrycache.upstream;

import com.google.cloud.tools.jib.api.Credential;
import io.registrycache.oci.RepositoryName;
import java.util.Optional;
import reactor.core.publisher.Mono;

/**
 * Obtains a pull token for one repository of an upstream that answered with a {@code Bearer}
 * challenge (Docker Registry token authentication: {@code GET <realm>?service=<service>
 * &scope=repository:<name>:pull}, Basic credentials when configured).
 *
 * <p>Fails with {@link UpstreamException}: {@code UNAUTHORIZED} (401) when the realm rejects the
 * credentials or cannot be used, {@code DENIED} (403) when it denies pull access, {@code
 * UPSTREAM_UNAVAILABLE} (502/503/504) when it cannot be reached or is refused by the redirect
 * policy.
 */
interface TokenProvider {

  /**
   * A token for {@code repository} from the challenge's realm.
   *
   * @param challenge a {@code Bearer} challenge with a {@code realm}
   * @param credential sent as Basic credentials to the realm, or empty for an anonymous token
   * @return a {@code Bearer} authorization, reusable for the token's {@code expires_in} less a
   *     safety margin
   */
  Mono<UpstreamAuthorization> token(
      Upstream upstream,
      RepositoryName repository,
      AuthChallenge challenge,
      Optional<Credential> credential);
}
