package io.registrycache.upstream;

import com.google.cloud.tools.jib.api.Credential;
import io.registrycache.oci.Json;
import io.registrycache.oci.OciErrorCode;
import io.registrycache.oci.RepositoryName;
import java.net.URI;
import java.time.Clock;
import java.time.Duration;
import java.util.List;
import java.util.Optional;
import java.util.function.Function;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import org.springframework.http.HttpHeaders;
import org.springframework.http.HttpStatus;
import org.springframework.http.MediaType;
import org.springframework.web.reactive.function.client.WebClient;
import org.springframework.web.util.UriComponentsBuilder;
import reactor.core.publisher.Mono;
import tools.jackson.core.JacksonException;
import tools.jackson.databind.JsonNode;
import tools.jackson.databind.json.JsonMapper;

/**
 * {@link TokenProvider} on the upstream's own {@link WebClient} (its TLS, timeouts and connection
 * pool), parsing the token response with Jackson and honouring its {@code expires_in}.
 *
 * <p>Where the token request may go is decided by {@link UpstreamAddressPolicy} (the realm is named
 * by the upstream, so it gets the same policy as a redirect); configured credentials go to another
 * origin than the upstream's only over https, unless {@code send-credentials-over-http}.
 */
final class WebClientTokenProvider implements TokenProvider {

  private static final Logger log = LoggerFactory.getLogger(WebClientTokenProvider.class);

  /** Lifetime of a token whose response has no {@code expires_in} (the token spec's default). */
  static final Duration DEFAULT_EXPIRES_IN = Duration.ofSeconds(60);

  private static final JsonMapper JSON = Json.MAPPER;

  private final Function<Upstream, WebClient> webClients;
  private final UpstreamAddressPolicy policy;
  private final String userAgent;

  WebClientTokenProvider(
      Function<Upstream, WebClient> webClients, UpstreamAddressPolicy policy, String userAgent) {
    this.webClients = webClients;
    this.policy = policy;
    this.userAgent = userAgent;
  }

  @Override
  public Mono<UpstreamAuthorization> token(
      Upstream upstream,
      RepositoryName repository,
      AuthChallenge challenge,
      Optional<Credential> credential) {
    String realm = challenge.realm().orElse(null);
    if (realm == null) {
      return Mono.error(unauthorized(upstream, "Bearer challenge without a realm"));
    }
    URI uri;
    try {
      uri =
          UriComponentsBuilder.fromUriString(realm)
              .queryParam("service", challenge.service().orElse(upstream.url().getAuthority()))
              .queryParam("scope", "repository:" + repository.value() + ":pull")
              .encode()
              .build()
              .toUri();
    } catch (IllegalArgumentException e) {
      return Mono.error(unauthorized(upstream, "token realm " + realm + " is not a valid URL"));
    }
    boolean sameOrigin = UpstreamAddressPolicy.sameOrigin(uri, upstream.url());
    boolean sendCredential =
        credential.isPresent()
            && (sameOrigin
                || "https".equalsIgnoreCase(uri.getScheme())
                || upstream.settings().sendCredentialsOverHttp());
    if (credential.isPresent() && !sendCredential) {
      return Mono.error(
          unauthorized(
              upstream,
              "token realm "
                  + realm
                  + " is plain http on another origin; credentials are sent there "
                  + "only over https (registry-cache.upstreams."
                  + upstream.key()
                  + ".send-credentials-over-http)"));
    }
    String what = "a token from " + realm;
    return policy
        .check(upstream, uri, "token realm")
        .then(
            webClients
                .apply(upstream)
                .get()
                .uri(uri)
                .headers(
                    h -> {
                      h.set(HttpHeaders.USER_AGENT, userAgent);
                      h.setAccept(List.of(MediaType.APPLICATION_JSON));
                      if (sendCredential) {
                        Credential c = credential.get();
                        h.set(
                            HttpHeaders.AUTHORIZATION,
                            UpstreamAuthorization.basic(c.getUsername(), c.getPassword()).header());
                      }
                    })
                .exchangeToMono(
                    response ->
                        response
                            .bodyToMono(byte[].class)
                            .defaultIfEmpty(new byte[0])
                            .map(
                                body ->
                                    answer(
                                        upstream,
                                        realm,
                                        response.statusCode().value(),
                                        response.headers().asHttpHeaders(),
                                        body))))
        .timeout(upstream.settings().connectTimeout().plus(upstream.settings().readTimeout()))
        .onErrorMap(
            e -> !(e instanceof UpstreamException),
            e -> UpstreamErrors.fromTransport(upstream, what, e))
        .doOnNext(
            a ->
                log.debug(
                    "upstream '{}': token for repository {} obtained from {}, reused for {}",
                    upstream.key(),
                    repository,
                    realm,
                    a.reuseFor()));
  }

  private static UpstreamAuthorization answer(
      Upstream upstream, String realm, int status, HttpHeaders headers, byte[] body) {
    if (status == 401) {
      throw unauthorized(upstream, "token realm " + realm + " rejected the credentials (401)");
    }
    if (status == 403) {
      throw new UpstreamException(
          upstream.key(),
          OciErrorCode.DENIED,
          HttpStatus.FORBIDDEN,
          UpstreamErrors.name(upstream) + ": token realm " + realm + " denied pull access (403)",
          null,
          null);
    }
    if (status < 200 || status >= 300) {
      throw UpstreamErrors.fromStatus(
          upstream,
          "a token from " + realm,
          OciErrorCode.UNAUTHORIZED,
          status,
          headers.getFirst(HttpHeaders.RETRY_AFTER),
          null,
          Clock.systemUTC());
    }
    return parse(upstream, realm, body);
  }

  /** Reads {@code token} (or {@code access_token}) and {@code expires_in} of a token response. */
  static UpstreamAuthorization parse(Upstream upstream, String realm, byte[] body) {
    JsonNode root;
    try {
      root = JSON.readTree(body);
    } catch (JacksonException e) {
      throw invalid(upstream, realm, "not JSON");
    }
    String token = text(root, "token");
    if (token == null) {
      token = text(root, "access_token");
    }
    if (token == null) {
      throw invalid(upstream, realm, "no token or access_token");
    }
    Duration expiresIn = DEFAULT_EXPIRES_IN;
    JsonNode e = root == null ? null : root.get("expires_in");
    if (e != null && e.isNumber() && e.asLong() > 0) {
      expiresIn = Duration.ofSeconds(e.asLong());
    }
    return new UpstreamAuthorization("Bearer", token, reuseFor(expiresIn));
  }

  /**
   * How long a token is reused: its lifetime less a tenth (at most 30 s, at least 1 s), so it is
   * not sent in its last moments; measured from receipt, not {@code issued_at} (clocks differ).
   */
  static Duration reuseFor(Duration expiresIn) {
    Duration margin = expiresIn.dividedBy(10);
    if (margin.compareTo(Duration.ofSeconds(30)) > 0) {
      margin = Duration.ofSeconds(30);
    }
    if (margin.compareTo(Duration.ofSeconds(1)) < 0) {
      margin = Duration.ofSeconds(1);
    }
    Duration reuse = expiresIn.minus(margin);
    return reuse.isNegative() ? Duration.ZERO : reuse;
  }

  private static String text(JsonNode root, String field) {
    JsonNode node = root == null ? null : root.get(field);
    return node != null && node.isString() && !node.stringValue().isBlank()
        ? node.stringValue()
        : null;
  }

  private static UpstreamException invalid(Upstream upstream, String realm, String why) {
    // The body is not quoted: it may hold a token.
    return new UpstreamException(
        upstream.key(),
        OciErrorCode.UPSTREAM_UNAVAILABLE,
        HttpStatus.BAD_GATEWAY,
        UpstreamErrors.name(upstream) + ": token realm " + realm + " answered 200 with " + why,
        null,
        null);
  }

  static UpstreamException unauthorized(Upstream upstream, String why) {
    return new UpstreamException(
        upstream.key(),
        OciErrorCode.UNAUTHORIZED,
        HttpStatus.UNAUTHORIZED,
        UpstreamErrors.name(upstream) + ": " + why,
        null,
        null);
  }
}
