package io.registrycache.api;

import io.registrycache.auth.AuthenticationRequired;
import io.registrycache.auth.BasicCredentials;
import io.registrycache.auth.Identity;
import io.registrycache.auth.PullAuthentication;
import io.registrycache.auth.PullAuthorization;
import io.registrycache.auth.TokenService;
import io.registrycache.oci.OciErrorCode;
import io.registrycache.oci.OciException;
import io.registrycache.upstream.Upstreams;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeSet;
import org.springframework.http.CacheControl;
import org.springframework.http.HttpHeaders;
import org.springframework.http.HttpMethod;
import org.springframework.http.HttpStatus;
import org.springframework.http.MediaType;
import org.springframework.stereotype.Component;
import org.springframework.util.MultiValueMap;
import org.springframework.web.reactive.function.server.ServerRequest;
import org.springframework.web.reactive.function.server.ServerResponse;
import reactor.core.publisher.Mono;

/**
 * {@code /v2/token}: the cache as its own token server, with {@code registry-cache.auth.token.enabled}
 * (distribution's "Token Authentication Specification" and "OAuth2 Token Authentication").
 *
 * <ul>
 *   <li>{@code GET /v2/token?service=<service>&scope=repository:<name>:pull[&scope=...]}, with
 *       HTTP Basic credentials (RFC 7617) or none (anonymous); wrong credentials are 401 {@code
 *       UNAUTHORIZED} with a {@code Basic} challenge; a {@code service} other than the configured
 *       one is 400 {@code UNSUPPORTED}
 *   <li>{@code POST /v2/token}, {@code application/x-www-form-urlencoded}, {@code
 *       grant_type=password&username=...&password=...&service=...&scope=...} (RFC 6749 section
 *       4.3); errors as RFC 6749 section 5.2: 400 {@code invalid_request}, {@code
 *       unsupported_grant_type}, {@code invalid_grant} (wrong credentials)
 * </ul>
 *
 * Either answers 200 {@code {"token", "access_token", "expires_in" (seconds), "issued_at" (RFC
 * 3339)}} with {@code Cache-Control: no-store}. A scope is granted when it asks for {@code pull}
 * of a repository the identity's rules allow, after the name is resolved as a request path names
 * it (bare or in-path form); others are left out of the token, not refused (the client then gets
 * 401 or 403 from the registry). At most {@value #MAX_SCOPES} scopes are looked at.
 *
 * <p>With an upstream that takes each client's own credentials ({@code credentials:
 * passthrough}), the user name and password given here are kept in memory for as long as the
 * token is valid, and passed to that upstream on requests bearing the token ({@link
 * TokenService#issue(Identity, Set, BasicCredentials)}); credentials the cache does not know are
 * then accepted for such upstreams' scopes only.
 */
@Component
public class TokenEndpoint {

  static final int MAX_SCOPES = 100;

  private final TokenService tokens;
  private final PullAuthentication authentication;
  private final PullAuthorization authorization;
  private final Upstreams upstreams;

  public TokenEndpoint(
      TokenService tokens, PullAuthentication authentication, PullAuthorization authorization, Upstreams upstreams) {
    this.tokens = tokens;
    this.authentication = authentication;
    this.authorization = authorization;
    this.upstreams = upstreams;
  }

  /** Whether the token flow is on. */
  public boolean enabled() {
    return tokens.enabled();
  }

  /** {@code GET} or {@code POST /v2/token}; other methods are 405 {@code UNSUPPORTED}. */
  public Mono<ServerResponse> handle(ServerRequest request) {
    if (HttpMethod.GET.equals(request.method())) {
      return get(request);
    }
    if (HttpMethod.POST.equals(request.method())) {
      return post(request);
    }
    return OciErrors.toResponse(request, new OciException(OciErrorCode.UNSUPPORTED,
        request.method() + " is not supported on the token endpoint: GET or POST"));
  }

  private Mono<ServerResponse> get(ServerRequest request) {
    MultiValueMap<String, String> query = request.queryParams();
    String service = query.getFirst("service");
    if (service != null && !service.equals(tokens.service())) {
      return OciErrors.toResponse(request, new OciException(OciErrorCode.UNSUPPORTED, HttpStatus.BAD_REQUEST,
          "unknown service; this token server is for '" + tokens.service() + "'"));
    }
    List<String> authorization = request.headers().header(HttpHeaders.AUTHORIZATION);
    return authentication.authenticate(authorization, null, RegistryRoutes.clientAddress(request))
        .flatMap(identity -> answer(identity, query.getOrDefault("scope", List.of()), given(authorization)))
        .onErrorResume(AuthenticationRequired.class, e -> OciErrors.toResponse(request, e))
        .onErrorResume(TokenEndpoint::tooManyFailures, e -> OciErrors.toResponse(request, e));
  }

  /** 429 of the failed-check limit (registry-cache.rate-limit.failed-checks): answered as an OCI error with Retry-After. */
  private static boolean tooManyFailures(Throwable e) {
    return e instanceof OciException oci && oci.code() == OciErrorCode.TOOMANYREQUESTS;
  }

  private Mono<ServerResponse> post(ServerRequest request) {
    return request.formData().flatMap(form -> {
      String grant = form.getFirst("grant_type");
      if (grant == null) {
        return oauthError(HttpStatus.BAD_REQUEST, "invalid_request", "grant_type is required");
      }
      if (!grant.equals("password")) {
        return oauthError(HttpStatus.BAD_REQUEST, "unsupported_grant_type", "only grant_type=password is supported");
      }
      String service = form.getFirst("service");
      if (service != null && !service.equals(tokens.service())) {
        return oauthError(HttpStatus.BAD_REQUEST, "invalid_request", "unknown service");
      }
      String scope = form.getFirst("scope");
      String username = form.getFirst("username");
      String password = form.getFirst("password");
      return authentication.authenticate(username, password, RegistryRoutes.clientAddress(request))
          .flatMap(identity -> answer(identity, scope == null ? List.of() : List.of(scope),
              new BasicCredentials(username, password)))
          .onErrorResume(AuthenticationRequired.class,
              e -> oauthError(HttpStatus.BAD_REQUEST, "invalid_grant", "invalid user name or password"))
          .onErrorResume(TokenEndpoint::tooManyFailures, e -> OciErrors.toResponse(request, e));
    });
  }

  /** The Basic credentials of an already authenticated token request, for pass-through upstreams; null without. */
  private static BasicCredentials given(List<String> authorization) {
    if (authorization.size() != 1) {
      return null;
    }
    try {
      return BasicCredentials.parse(authorization.get(0));
    } catch (BasicCredentials.InvalidCredentials e) {
      return null;
    }
  }

  private Mono<ServerResponse> answer(Identity identity, List<String> scopes, BasicCredentials given) {
    TokenService.Issued issued = tokens.issue(identity, granted(identity, scopes), given);
    Map<String, Object> body = new LinkedHashMap<>();
    body.put("token", issued.token());
    body.put("access_token", issued.token());
    body.put("expires_in", issued.expiresIn());
    body.put("issued_at", issued.issuedAt().toString());
    return ServerResponse.ok()
        .contentType(MediaType.APPLICATION_JSON)
        .cacheControl(CacheControl.noStore())
        .bodyValue(body);
  }

  /** The repository names of {@code scopes} whose pull the rules allow {@code identity}. */
  Set<String> granted(Identity identity, List<String> scopes) {
    Set<String> granted = new TreeSet<>();
    int looked = 0;
    for (String parameter : scopes) {
      for (String scope : parameter.split(" ")) {
        if (scope.isEmpty() || ++looked > MAX_SCOPES) {
          continue;
        }
        int last = scope.lastIndexOf(':');
        if (!scope.startsWith("repository:") || last <= "repository:".length()) {
          continue;
        }
        String name = scope.substring("repository:".length(), last);
        if (!List.of(scope.substring(last + 1).split(",")).contains("pull")) {
          continue;
        }
        try {
          RequestTarget target = RequestTarget.resolve(name, null, upstreams);
          if (authorization.allows(
              identity, target.upstream().key(), target.name().value(), target.upstream().passthrough())) {
            granted.add(name);
          }
        } catch (OciException e) {
          // a name this cache does not serve is simply not granted
        }
      }
    }
    return granted;
  }

  private static Mono<ServerResponse> oauthError(HttpStatus status, String error, String description) {
    return ServerResponse.status(status)
        .contentType(MediaType.APPLICATION_JSON)
        .cacheControl(CacheControl.noStore())
        .bodyValue(Map.of("error", error, "error_description", description));
  }
}
