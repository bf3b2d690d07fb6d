package io.registrycache.api;

import io.registrycache.auth.Identity;
import io.registrycache.proxy.CacheOutcome;
import org.springframework.boot.autoconfigure.condition.ConditionalOnProperty;
import org.springframework.core.Ordered;
import org.springframework.http.HttpStatusCode;
import org.springframework.http.server.reactive.ServerHttpRequest;
import org.springframework.stereotype.Component;
import org.springframework.web.server.ServerWebExchange;
import org.springframework.web.server.WebFilter;
import org.springframework.web.server.WebFilterChain;
import reactor.core.publisher.Mono;
import reactor.core.publisher.SignalType;

/**
 * The access log's line ({@link AccessLog}) for the {@code /v2} requests WebFlux serves: {@code
 * /v2/}, tags, referrers, the token endpoint, errors before a route; the pull route writes its own.
 * On when {@code registry-cache.access-log.enabled=true}.
 */
@Component
@ConditionalOnProperty(prefix = "registry-cache.access-log", name = "enabled", havingValue = "true")
public class AccessLogFilter implements WebFilter, Ordered {

  private final AccessLog accessLog;

  public AccessLogFilter(AccessLog accessLog) {
    this.accessLog = accessLog;
  }

  @Override
  public int getOrder() {
    return Ordered.HIGHEST_PRECEDENCE + 1;
  }

  @Override
  public Mono<Void> filter(ServerWebExchange exchange, WebFilterChain chain) {
    ServerHttpRequest request = exchange.getRequest();
    String path = request.getPath().value();
    if (!path.startsWith("/v2")) {
      return chain.filter(exchange);
    }
    long started = System.nanoTime();
    CacheOutcome outcome = new CacheOutcome();
    return chain
        .filter(exchange)
        .contextWrite(ctx -> ctx.put(CacheOutcome.CONTEXT_KEY, outcome))
        .doFinally(
            signal -> {
              HttpStatusCode status = exchange.getResponse().getStatusCode();
              Identity identity = exchange.getAttribute(Identity.ATTRIBUTE);
              accessLog.write(
                  request.getMethod().name(),
                  path,
                  status == null ? 200 : status.value(),
                  exchange.getResponse().getHeaders().getContentLength(),
                  started,
                  outcome,
                  signal == SignalType.CANCEL,
                  identity);
            });
  }
}
