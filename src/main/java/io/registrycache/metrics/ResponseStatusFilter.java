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
 * {@code http.server.requests} observation, switched off in {@code application.properties} ({@code
 * management.observations.enable.http.server.requests: false}): that observation built a context,
 * looked up a timer by five tags and ran a long-task timer for every request, about 10 % of the CPU
 * of a warm pull (docs/performance.md). This is one array read and one counter increment. A
 * response without a status set counts as 200, as Netty sends it. Requests below {@code /v2/} (not
 * the version check itself) are counted in and out for {@link PullActivity}.
 */
@Component
public class ResponseStatusFilter implements WebFilter, Ordered {

  private final CacheMetrics metrics;
  private final PullActivity activity;

  public ResponseStatusFilter(CacheMetrics metrics, PullActivity activity) {
    this.metrics = metrics;
    this.activity = activity;
  }

  @Override
  public int getOrder() {
    return Ordered.HIGHEST_PRECEDENCE;
  }

  @Override
  public Mono<Void> filter(ServerWebExchange exchange, WebFilterChain chain) {
    String path = exchange.getRequest().getPath().value();
    if (!path.startsWith("/v2")) {
      return chain.filter(exchange);
    }
    boolean pull =
        path.length() > 4; // longer than "/v2/": a repository's manifest, blob, tags or referrers
    if (pull) {
      activity.started();
    }
    return chain
        .filter(exchange)
        .doFinally(
            signal -> {
              if (pull) {
                activity.ended();
              }
              HttpStatusCode status = exchange.getResponse().getStatusCode();
              metrics.response(status == null ? 200 : status.value());
            });
  }
}
