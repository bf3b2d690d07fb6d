package io.registrycache.api;

import static org.springframework.web.reactive.function.server.RequestPredicates.path;

import io.registrycache.auth.Identity;
import io.registrycache.auth.PullAuthentication;
import io.registrycache.proxy.FillPermits;
import io.registrycache.ratelimit.RateLimits;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Configuration;
import org.springframework.core.Ordered;
import org.springframework.core.annotation.Order;
import org.springframework.http.HttpHeaders;
import org.springframework.web.reactive.function.server.RouterFunction;
import org.springframework.web.reactive.function.server.RouterFunctions;
import org.springframework.web.reactive.function.server.ServerRequest;
import org.springframework.web.reactive.function.server.ServerResponse;
import org.springframework.web.server.WebFilter;
import reactor.core.publisher.Mono;

/** Routes of the registry API, and the headers every {@code /v2} response carries. */
@Configuration(proxyBeanMethods = false)
public class RegistryRoutes {

  /**
   * The {@code /v2} routes WebFlux serves: {@code /v2/}, tags, referrers, the token endpoint and
   * every request the pull route ({@link PullRoute}: GET and HEAD of manifests and blobs) does not
   * take; both pass the same {@link PullGate}. With {@code registry-cache.auth.enabled}, every
   * request first has its credentials checked ({@link PullAuthentication}): bad credentials are 401
   * {@code UNAUTHORIZED} with the challenge, and so is {@code /v2/} without credentials (the API
   * version check is how Docker clients learn the challenge, distribution's registry does the
   * same); the identity goes to the handler as the request attribute {@link Identity#ATTRIBUTE},
   * which checks the rules once it knows the upstream and repository. With {@code
   * registry-cache.auth.token.enabled}, {@code /v2/token} ({@link TokenEndpoint}) comes first and
   * challenges are {@code Bearer}. Each authenticated request is counted as {@code
   * registry_cache_identity_requests_total{identity}} ({@link Identity#metricLabel()}).
   *
   * <p>With {@code registry-cache.rate-limit.enabled}, every request below {@code /v2/<name>/} then
   * takes a token of its identity's requests-per-second bucket ({@link RateLimits#admit}; anonymous
   * ones per client address), else 429 {@code TOOMANYREQUESTS} with {@code Retry-After}, and
   * carries its identity's {@link FillPermits} in its Reactor context, which the proxy services
   * consult when the request is about to start an upstream fill; a client address over its failed
   * credential checks gets 429 too. Only these routes: the management and peer ports are not
   * affected.
   */
  @Bean
  public RouterFunction<ServerResponse> registryApi(
      RegistryHandler handler,
      PullAuthentication authentication,
      TokenEndpoint tokenEndpoint,
      RateLimits limits,
      PullGate gate) {
    RouterFunction<ServerResponse> routes =
        RouterFunctions.route(path("/v2").or(path("/v2/")), handler::base)
            .and(RouterFunctions.route(path("/v2/**"), handler::dispatch));
    if (!authentication.enabled() && !limits.enabled()) {
      return routes;
    }
    RouterFunction<ServerResponse> checked =
        routes.filter(
            (request, next) -> {
              String p = request.path();
              return gate.enter(
                      request.headers().header(HttpHeaders.AUTHORIZATION),
                      () -> RegistryHandler.target(request).absoluteUri(request.uri().getScheme()),
                      clientAddress(request),
                      p.equals("/v2") || p.equals("/v2/"))
                  .flatMap(
                      entry -> {
                        if (authentication.enabled()) {
                          request
                              .attributes()
                              .put(
                                  Identity.ATTRIBUTE,
                                  entry.identity()); // "-" in the access log while auth is off
                        }
                        Mono<ServerResponse> response = next.handle(request);
                        return entry.permits() == null
                            ? response
                            : response.contextWrite(
                                context -> context.put(FillPermits.CONTEXT_KEY, entry.permits()));
                      })
                  .onErrorResume(e -> OciErrors.toResponse(request, e));
            });
    if (!authentication.enabled() || !tokenEndpoint.enabled()) {
      return checked;
    }
    // The token endpoint takes its own credentials (Basic, or the OAuth2 password grant's form).
    return RouterFunctions.route(path("/v2/token"), tokenEndpoint::handle).and(checked);
  }

  /**
   * The client's IP address as text (the TCP peer's, or the forwarded one when {@code
   * server.forward-headers-strategy} is set), or {@code null} when unknown: what anonymous rate
   * limits and the failed-check limit are kept by.
   */
  static String clientAddress(ServerRequest request) {
    return request
        .remoteAddress()
        .map(a -> a.getAddress() != null ? a.getAddress().getHostAddress() : a.getHostString())
        .orElse(null);
  }

  /** {@code Docker-Distribution-API-Version: registry/2.0}, which Docker clients still check. */
  @Bean
  @Order(Ordered.HIGHEST_PRECEDENCE)
  public WebFilter distributionApiVersionHeader() {
    return (exchange, chain) -> {
      if (exchange.getRequest().getPath().value().startsWith("/v2")) {
        exchange.getResponse().getHeaders().set("Docker-Distribution-API-Version", "registry/2.0");
      }
      return chain.filter(exchange);
    };
  }
}
