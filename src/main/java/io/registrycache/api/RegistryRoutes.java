package io.registrycache.api;

import static org.springframework.web.reactive.function.server.RequestPredicates.path;

import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Configuration;
import org.springframework.core.Ordered;
import org.springframework.core.annotation.Order;
import org.springframework.web.reactive.function.server.RouterFunction;
import org.springframework.web.reactive.function.server.RouterFunctions;
import org.springframework.web.reactive.function.server.ServerResponse;
import org.springframework.web.server.WebFilter;
import reactor.core.scheduler.Schedulers;

/** Routes of the registry API, and the headers every {@code /v2} response carries. */
@Configuration(proxyBeanMethods = false)
public class RegistryRoutes {

  @Bean
  public RouterFunction<ServerResponse> registryApi(RegistryHandler handler) {
    return RouterFunctions.route(path("/v2").or(path("/v2/")), handler::base)
        .andRoute(path("/v2/**"), handler::dispatch);
  }

  /**
   * Completes every exchange off the event loop's current call stack. Reactor Netty 1.3.7 stops
   * reading a keep-alive connection when a request that was queued behind a still-terminating one
   * completes synchronously (reactor-netty issue #4361, fixed after 1.3.7): the client's next
   * request then hangs. Answers from memory (a manifest by digest, {@code /v2/}, errors) are
   * synchronous, so without this hop a client reusing its connection after a blob could hang.
   * Remove once the managed reactor-netty has the fix.
   */
  @Bean
  @Order(Ordered.HIGHEST_PRECEDENCE)
  public WebFilter asynchronousCompletion() {
    return (exchange, chain) -> chain.filter(exchange).subscribeOn(Schedulers.parallel());
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
