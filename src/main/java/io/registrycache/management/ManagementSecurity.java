package io.registrycache.management;

import io.registrycache.config.AdminProperties;
import io.registrycache.config.RegistryCacheProperties;
import java.nio.charset.StandardCharsets;
import java.util.Optional;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import org.springframework.boot.actuate.autoconfigure.web.ManagementContextConfiguration;
import org.springframework.boot.actuate.autoconfigure.web.ManagementContextType;
import org.springframework.boot.security.autoconfigure.actuate.web.reactive.EndpointRequest;
import org.springframework.boot.web.server.context.WebServerApplicationContext;
import org.springframework.context.ApplicationContext;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Condition;
import org.springframework.context.annotation.ConditionContext;
import org.springframework.context.annotation.Conditional;
import org.springframework.core.Ordered;
import org.springframework.core.annotation.Order;
import org.springframework.core.type.AnnotatedTypeMetadata;
import org.springframework.http.HttpStatus;
import org.springframework.http.MediaType;
import org.springframework.http.server.reactive.ServerHttpResponse;
import org.springframework.security.config.annotation.web.reactive.EnableWebFluxSecurity;
import org.springframework.security.config.web.server.ServerHttpSecurity;
import org.springframework.security.oauth2.server.resource.web.server.BearerTokenServerAuthenticationEntryPoint;
import org.springframework.security.web.server.SecurityWebFilterChain;
import org.springframework.security.web.server.ServerAuthenticationEntryPoint;
import org.springframework.security.web.server.context.NoOpServerSecurityContextRepository;
import org.springframework.security.web.server.firewall.ServerExchangeRejectedHandler;
import org.springframework.security.web.server.firewall.StrictServerWebExchangeFirewall;
import org.springframework.security.web.server.savedrequest.NoOpServerRequestCache;
import org.springframework.security.web.server.util.matcher.OrServerWebExchangeMatcher;
import org.springframework.security.web.server.util.matcher.ServerWebExchangeMatcher;
import org.springframework.web.server.ServerWebExchange;
import reactor.core.publisher.Mono;

/**
 * Who may use the management port (docs/security.md, "Management port"): Spring Security's web
 * filter chain, in the management server's own Spring context only, so the registry port's requests
 * never meet it. Its firewall ({@link StrictServerWebExchangeFirewall}) refuses, with 400 and
 * {@code {"error": "..."}}, every request whose path holds an encoded or doubled slash, a dot
 * segment, a {@code ;} path parameter, an encoded {@code .} or {@code %}, a backslash or a control
 * character, or whose method is not one of GET, HEAD, POST, PUT, PATCH, DELETE, OPTIONS; what
 * remains is matched the way WebFlux routes it (decoded, path parameters removed):
 *
 * <ul>
 *   <li>{@code health} (and below it, the probes) and, unless {@code
 *       registry-cache.admin.public-prometheus=false}, {@code prometheus}: anyone; an {@code
 *       Authorization} header is not looked at
 *   <li>everything else on the port, with a token ({@code registry-cache.admin.token} or {@code
 *       token-file}): {@code Authorization: Bearer <token>} (RFC 6750), else 401 with {@code
 *       WWW-Authenticate: Bearer realm="registry-cache management"} (and {@code
 *       error="invalid_token"} when a token was sent but is not this one) ({@link ManagementToken})
 *   <li>everything else, without a token: loopback clients only, 403 with {@code {"error": "..."}}
 *       for anyone else ({@link LoopbackClients})
 * </ul>
 *
 * No session, no CSRF token (no cookie is ever read), no login page, no generated password. Loaded
 * into the management server's context (registered as a management context configuration); the copy
 * that component scanning finds in the main context stays inert ({@link ManagementServerContext}).
 */
@ManagementContextConfiguration(value = ManagementContextType.CHILD, proxyBeanMethods = false)
@Conditional(ManagementSecurity.ManagementServerContext.class)
@EnableWebFluxSecurity
public class ManagementSecurity {

  private static final Logger log = LoggerFactory.getLogger(ManagementSecurity.class);

  /** The realm of the 401 challenge. */
  static final String REALM = "registry-cache management";

  static final byte[] LOOPBACK_ONLY =
      json(
          "management endpoints answer loopback clients only; set "
              + "registry-cache.admin.token-file (or REGISTRY_CACHE_ADMIN_TOKEN) to allow others with a bearer token");
  static final byte[] FIREWALL_REFUSAL =
      json(
          "request refused: an encoded or doubled slash, a dot segment, a ';' "
              + "path parameter, an encoded '.' or '%', a backslash or a control character in the path, or a method the "
              + "management port does not take");

  /** Health (and its probes) and, when public, prometheus: no credentials looked at. */
  @Bean
  @Order(Ordered.HIGHEST_PRECEDENCE)
  SecurityWebFilterChain publicManagementEndpoints(
      ServerHttpSecurity http, RegistryCacheProperties properties) {
    ServerWebExchangeMatcher open =
        properties.admin().publicPrometheus()
            ? new OrServerWebExchangeMatcher(
                EndpointRequest.to("health"), EndpointRequest.to("prometheus"))
            : EndpointRequest.to("health");
    return stateless(http)
        .securityMatcher(open)
        .authorizeExchange(exchanges -> exchanges.anyExchange().permitAll())
        .build();
  }

  /** Everything else on the management port: the token, or without one loopback clients only. */
  @Bean
  @Order(Ordered.LOWEST_PRECEDENCE)
  SecurityWebFilterChain protectedManagementEndpoints(
      ServerHttpSecurity http, RegistryCacheProperties properties) {
    AdminProperties admin = properties.admin();
    Optional<ManagementToken> token = ManagementToken.of(admin);
    stateless(http);
    if (token.isPresent()) {
      BearerTokenServerAuthenticationEntryPoint challenge =
          new BearerTokenServerAuthenticationEntryPoint();
      challenge.setRealmName(REALM);
      ManagementToken manager = token.get();
      http.oauth2ResourceServer(
              bearer ->
                  bearer
                      .authenticationManagerResolver(exchange -> Mono.just(manager))
                      .authenticationEntryPoint(challenge))
          .exceptionHandling(errors -> errors.authenticationEntryPoint(challenge))
          .authorizeExchange(
              exchanges ->
                  exchanges.anyExchange().hasAuthority(ManagementToken.AUTHORITY.getAuthority()));
    } else {
      ServerAuthenticationEntryPoint forbidden =
          (exchange, denied) -> write(exchange, HttpStatus.FORBIDDEN, LOOPBACK_ONLY);
      http.exceptionHandling(
              errors ->
                  errors
                      .authenticationEntryPoint(forbidden)
                      .accessDeniedHandler(
                          (exchange, denied) ->
                              write(exchange, HttpStatus.FORBIDDEN, LOOPBACK_ONLY)))
          .authorizeExchange(exchanges -> exchanges.anyExchange().access(new LoopbackClients()));
    }
    log.info(
        token.isEmpty()
            ? "Management endpoints other than health{}: loopback clients only (no registry-cache.admin.token set)"
            : "Management endpoints other than health{}: bearer token required",
        admin.publicPrometheus() ? " and prometheus" : "");
    return http.build();
  }

  /**
   * What the firewall refuses: 400 with a JSON body (Spring Security's default answers 400 without
   * one). The refusal's reason is not echoed: it can quote the request's own header values.
   */
  @Bean
  ServerExchangeRejectedHandler firewallRefusal() {
    return (exchange, rejected) -> write(exchange, HttpStatus.BAD_REQUEST, FIREWALL_REFUSAL);
  }

  /** No session, no saved request, no CSRF token, login page, logout or Basic challenge. */
  private static ServerHttpSecurity stateless(ServerHttpSecurity http) {
    return http.securityContextRepository(NoOpServerSecurityContextRepository.getInstance())
        .requestCache(cache -> cache.requestCache(NoOpServerRequestCache.getInstance()))
        .csrf(ServerHttpSecurity.CsrfSpec::disable)
        .httpBasic(ServerHttpSecurity.HttpBasicSpec::disable)
        .formLogin(ServerHttpSecurity.FormLoginSpec::disable)
        .logout(ServerHttpSecurity.LogoutSpec::disable)
        .anonymous(ServerHttpSecurity.AnonymousSpec::disable);
  }

  private static Mono<Void> write(ServerWebExchange exchange, HttpStatus status, byte[] body) {
    ServerHttpResponse response = exchange.getResponse();
    if (response.isCommitted()) {
      return Mono.empty();
    }
    response.setStatusCode(status);
    response.getHeaders().setContentType(MediaType.APPLICATION_JSON);
    response.getHeaders().setContentLength(body.length);
    return response.writeWith(Mono.fromSupplier(() -> response.bufferFactory().wrap(body)));
  }

  private static byte[] json(String error) {
    return ("{\"error\":\"" + error + "\"}").getBytes(StandardCharsets.UTF_8);
  }

  /**
   * True in the management server's own Spring context (server namespace {@code management}), false
   * in the main one, which component scanning would otherwise put this configuration in.
   */
  static final class ManagementServerContext implements Condition {
    @Override
    public boolean matches(ConditionContext context, AnnotatedTypeMetadata metadata) {
      return context.getResourceLoader() instanceof ApplicationContext application
          && WebServerApplicationContext.hasServerNamespace(application, "management");
    }
  }
}
