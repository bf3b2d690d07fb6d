package io.registrycache.api;

import io.registrycache.auth.AuthenticationRequired;
import io.registrycache.auth.BasicCredentials;
import io.registrycache.auth.Credentials;
import io.registrycache.auth.Identity;
import io.registrycache.auth.PullAccess;
import io.registrycache.auth.PullAuthentication;
import io.registrycache.auth.TokenService;
import io.registrycache.oci.OciErrorCode;
import io.registrycache.oci.OciException;
import io.registrycache.upstream.Upstreams;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeSet;
import org.springframework.core.ResolvableType;
import org.springframework.core.codec.DecodingException;
import org.springframework.core.io.buffer.DataBufferLimitException;
import org.springframework.http.CacheControl;
import org.springframework.http.HttpHeaders;
import org.springframework.http.HttpMethod;
import org.springframework.http.HttpStatus;
import org.springframework.http.InvalidMediaTypeException;
import org.springframework.http.MediaType;
import org.springframework.http.codec.FormHttpMessageReader;
import org.springframework.stereotype.Component;
import org.springframework.util.LinkedMultiValueMap;
import org.springframework.util.MultiValueMap;
import org.springframework.web.reactive.function.server.ServerRequest;
import org.springframework.web.reactive.function.server.ServerResponse;
import reactor.core.publisher.Mono;

/**
 * {@code /v2/token}: the cache as its own token server, with {@code
 * registry-cache.auth.token.enabled} (distribution's "Token Authentication Specification" and
 * "OAuth2 Token Authentication").
 *
 * <ul>
 *   <li>{@code GET /v2/token?service=<service>&scope=repository:<name>:pull[&scope=...]}, with HTTP
 *       Basic credentials (RFC 7617) or none (anonymous); wrong credentials are 401 {@code
 *       UNAUTHORIZED} with a {@code Basic} challenge; a {@code service} other than the configured
 *       one is 400 {@code UNSUPPORTED}
 *   <li>{@code POST /v2/token}, {@code application/x-www-form-urlencoded}, {@code
 *       grant_type=password&username=...&password=...&service=...&scope=...} (RFC 6749 section
 *       4.3), at most {@value #MAX_FORM_BYTES} bytes
 * </ul>
 *
 * <p>Errors of the request itself are RFC 6749 section 5.2's, with {@code Cache-Control: no-store}:
 * {@code {"error", "error_description", "errors": [{"code", "message"}]}} (the OAuth2 error and the
 * OCI error body in one JSON object):
 *
 * <ul>
 *   <li>400 {@code invalid_request}: a query or form that cannot be read (a malformed
 *       percent-escape, a charset Java does not know), a {@code POST} that is not {@code
 *       application/x-www-form-urlencoded}, a parameter given twice (RFC 6749 section 3.1), a
 *       missing {@code grant_type}, {@code username} or {@code password}, an unknown {@code
 *       service}; OCI code {@code UNSUPPORTED}
 *   <li>413 {@code invalid_request}: a form over {@value #MAX_FORM_BYTES} bytes; OCI code {@code
 *       SIZE_INVALID}
 *   <li>400 {@code unsupported_grant_type}: a {@code grant_type} other than {@code password}; OCI
 *       code {@code UNSUPPORTED}
 *   <li>400 {@code invalid_grant}: wrong user name or password; OCI code {@code UNAUTHORIZED}
 * </ul>
 *
 * Either answers 200 {@code {"token", "access_token", "expires_in" (seconds), "issued_at" (RFC
 * 3339)}} with {@code Cache-Control: no-store}. A scope is granted when it asks for {@code pull} of
 * a repository the identity's rules allow, after the name is resolved as a request path names it
 * (bare or in-path form); others are left out of the token, not refused (the client then gets 401
 * or 403 from the registry). At most {@value #MAX_SCOPES} scopes are looked at.
 *
 * <p>With an upstream that takes each client's own credentials ({@code credentials: passthrough}),
 * the user name and password given here are kept in memory for as long as the token is valid, and
 * passed to that upstream on requests bearing the token ({@link TokenService#issue(Identity, Set,
 * BasicCredentials)}); credentials the cache does not know are then accepted for such upstreams'
 * scopes only.
 */
@Component
public class TokenEndpoint {

  static final int MAX_SCOPES = 100;

  /** The largest form body read, in bytes; a larger one is 413. */
  public static final int MAX_FORM_BYTES = 8192;

  private static final ResolvableType FORM =
      ResolvableType.forClassWithGenerics(MultiValueMap.class, String.class, String.class);

  /** Parameters that may be given once only (RFC 6749 section 3.1). */
  private static final List<String> SINGLE =
      List.of("grant_type", "username", "password", "service", "scope");

  private final TokenService tokens;
  private final PullAuthentication authentication;
  private final PullAccess access;
  private final Upstreams upstreams;
  private final FormHttpMessageReader forms = new FormHttpMessageReader();

  public TokenEndpoint(
      TokenService tokens,
      PullAuthentication authentication,
      PullAccess access,
      Upstreams upstreams) {
    this.tokens = tokens;
    this.authentication = authentication;
    this.access = access;
    this.upstreams = upstreams;
    forms.setMaxInMemorySize(MAX_FORM_BYTES);
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
    return OciErrors.toResponse(
        request,
        new OciException(
            OciErrorCode.UNSUPPORTED,
            request.method() + " is not supported on the token endpoint: GET or POST"));
  }

  private Mono<ServerResponse> get(ServerRequest request) {
    MultiValueMap<String, String> query;
    try {
      query = request.queryParams();
    } catch (IllegalArgumentException e) {
      return invalidRequest("the query cannot be read: " + e.getMessage());
    }
    String repeated = repeated(query, List.of("service", "account"));
    if (repeated != null) {
      return invalidRequest(repeated + " is given more than once");
    }
    String service = query.getFirst("service");
    if (service != null && !service.equals(tokens.service())) {
      return OciErrors.toResponse(
          request,
          new OciException(
              OciErrorCode.UNSUPPORTED,
              HttpStatus.BAD_REQUEST,
              "unknown service; this token server is for '" + tokens.service() + "'"));
    }
    List<String> authorization = request.headers().header(HttpHeaders.AUTHORIZATION);
    return authentication
        .authenticate(authorization, null, RegistryRoutes.clientAddress(request))
        .flatMap(
            identity ->
                answer(identity, query.getOrDefault("scope", List.of()), given(authorization)))
        .onErrorResume(AuthenticationRequired.class, e -> OciErrors.toResponse(request, e))
        .onErrorResume(TokenEndpoint::tooManyFailures, e -> OciErrors.toResponse(request, e));
  }

  /**
   * 429 of the failed-check limit (registry-cache.rate-limit.failed-checks): answered as an OCI
   * error with Retry-After.
   */
  private static boolean tooManyFailures(Throwable e) {
    return e instanceof OciException oci && oci.code() == OciErrorCode.TOOMANYREQUESTS;
  }

  private Mono<ServerResponse> post(ServerRequest request) {
    MediaType type;
    try {
      type = request.headers().contentType().orElse(null);
    } catch (InvalidMediaTypeException e) {
      return invalidRequest("the Content-Type cannot be read");
    }
    if (type == null || !MediaType.APPLICATION_FORM_URLENCODED.equalsTypeAndSubtype(type)) {
      return invalidRequest(
          "the body must be application/x-www-form-urlencoded (RFC 6749 section 4.3.2)");
    }
    if (request.headers().contentLength().orElse(0) > MAX_FORM_BYTES) {
      return tooLarge();
    }
    return Mono.defer(() -> forms.readMono(FORM, request.exchange().getRequest(), Map.of()))
        .defaultIfEmpty(new LinkedMultiValueMap<>())
        .flatMap(form -> grant(request, form))
        .onErrorResume(DataBufferLimitException.class, e -> tooLarge())
        .onErrorResume(TokenEndpoint::unreadable, e -> invalidRequest("the form cannot be read"));
  }

  /** A form Spring's reader could not decode: a malformed percent-escape, an unknown charset. */
  private static boolean unreadable(Throwable e) {
    return e instanceof IllegalArgumentException || e instanceof DecodingException;
  }

  private Mono<ServerResponse> grant(ServerRequest request, MultiValueMap<String, String> form) {
    String repeated = repeated(form, SINGLE);
    if (repeated != null) {
      return invalidRequest(repeated + " is given more than once");
    }
    String grant = value(form, "grant_type");
    if (grant == null) {
      return invalidRequest("grant_type is required");
    }
    if (!grant.equals("password")) {
      return oauthError(
          HttpStatus.BAD_REQUEST,
          "unsupported_grant_type",
          OciErrorCode.UNSUPPORTED,
          "only grant_type=password is supported");
    }
    String service = value(form, "service");
    if (service != null && !service.equals(tokens.service())) {
      return invalidRequest("unknown service");
    }
    String username = value(form, "username");
    String password = value(form, "password");
    if (username == null || password == null) {
      return invalidRequest("username and password are required");
    }
    String scope = value(form, "scope");
    return authentication
        .authenticate(username, password, RegistryRoutes.clientAddress(request))
        .flatMap(
            identity ->
                answer(
                    identity,
                    scope == null ? List.of() : List.of(scope),
                    new BasicCredentials(username, password)))
        .onErrorResume(
            AuthenticationRequired.class,
            e ->
                oauthError(
                    HttpStatus.BAD_REQUEST,
                    "invalid_grant",
                    OciErrorCode.UNAUTHORIZED,
                    "invalid user name or password"))
        .onErrorResume(TokenEndpoint::tooManyFailures, e -> OciErrors.toResponse(request, e));
  }

  /** A parameter's value; one without a value counts as omitted (RFC 6749 section 3.1). */
  private static String value(MultiValueMap<String, String> parameters, String name) {
    String value = parameters.getFirst(name);
    return value == null || value.isEmpty() ? null : value;
  }

  /** The first of {@code names} given more than once, or {@code null}. */
  private static String repeated(MultiValueMap<String, String> parameters, List<String> names) {
    for (String name : names) {
      List<String> values = parameters.get(name);
      if (values != null && values.size() > 1) {
        return name;
      }
    }
    return null;
  }

  /**
   * The Basic credentials of an already authenticated token request, for pass-through upstreams;
   * null without.
   */
  private static BasicCredentials given(List<String> authorization) {
    try {
      return Credentials.parse(authorization) instanceof BasicCredentials basic ? basic : null;
    } catch (Credentials.Invalid e) {
      return null;
    }
  }

  private Mono<ServerResponse> answer(
      Identity identity, List<String> scopes, BasicCredentials given) {
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

  /**
   * The repository names of {@code scopes} whose pull {@link PullAccess#grants} {@code identity}.
   */
  Set<String> granted(Identity identity, List<String> scopes) {
    Set<String> granted = new TreeSet<>();
    int looked = 0;
    for (String parameter : scopes) {
      for (String scope : parameter.split(" ", -1)) {
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
          if (access.grants(identity, target.upstream(), target.name())) {
            granted.add(name);
          }
        } catch (OciException e) {
          // a name this cache does not serve is simply not granted
        }
      }
    }
    return granted;
  }

  private static Mono<ServerResponse> invalidRequest(String description) {
    return oauthError(
        HttpStatus.BAD_REQUEST, "invalid_request", OciErrorCode.UNSUPPORTED, description);
  }

  private static Mono<ServerResponse> tooLarge() {
    return oauthError(
        HttpStatus.CONTENT_TOO_LARGE,
        "invalid_request",
        OciErrorCode.SIZE_INVALID,
        "the form is larger than " + MAX_FORM_BYTES + " bytes");
  }

  /** RFC 6749 section 5.2's error, with the OCI error body's list of errors beside it. */
  private static Mono<ServerResponse> oauthError(
      HttpStatus status, String error, OciErrorCode code, String description) {
    Map<String, Object> body = new LinkedHashMap<>();
    body.put("error", error);
    body.put("error_description", description);
    body.putAll(OciErrors.body(code, description, null));
    return ServerResponse.status(status)
        .contentType(MediaType.APPLICATION_JSON)
        .cacheControl(CacheControl.noStore())
        .bodyValue(body);
  }
}
