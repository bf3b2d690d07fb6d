package io.registrycache.metrics;

import org.springframework.core.Ordered;
import org.springframework.http.HttpStatusCode;
import org.springframework.stereotype.Component;
import org.springframework.web.server.ServerWebExchange;
import org.springframework.web.server.WebFilter;
import org.springframework.web.server.WebFilterChain;
import reactor.core.publisher.Mono;

/**
 * Counts every answer to a {@code /v2} request by status code ({@code
 * registry_cache_responses_total{status}}, {@link CacheMetrics#response}). It replaces Spring's
 * {@code http.server.requests} observation, switched off in {@code application.yml}
 * ({@code management.observations.enable.http.server.requests: false}): that observation built a
 * context, looked up a timer by five tags and ran a long-task timer for every request, about 10 %
 * of the CPU of a warm pull (docs/performance.md). This is one array read and one counter
 * increment. A response without a status set counts as 200, as Netty sends it.
 */
@Component
public class ResponseStatusFilter implements WebFilter, Ordered {

  private final CacheMetrics metrics;

  public ResponseStatusFilter(CacheMetrics metrics) {
    this.metrics = metrics;
  }

  @Override
  public int getOrder() {
    return Ordered.HIGHEST_PRECEDENCE;
  }

  @Override
  public Mono<Void> filter(ServerWebExchange exchange, WebFilterChain chain) {
    if (!exchange.getRequest().getPath().value().startsWith("/v2")) {
      return chain.filter(exchange);
    }
    return chain.filter(exchange).doFinally(signal -> {
      HttpStatusCode status = exchange.getResponse().getStatusCode();
      metrics.response(status == null ? 200 : status.value());
    });
  }
}
