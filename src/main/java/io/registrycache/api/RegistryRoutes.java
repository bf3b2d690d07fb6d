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

/** Routes of the registry API, and the headers every {@code /v2} response carries. */
@Configuration(proxyBeanMethods = false)
public class RegistryRoutes {

  @Bean
  public RouterFunction<ServerResponse> registryApi(RegistryHandler handler) {
    return RouterFunctions.route(path("/v2").or(path("/v2/")), handler::base)
        .andRoute(path("/v2/**"), handler::dispatch);
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
