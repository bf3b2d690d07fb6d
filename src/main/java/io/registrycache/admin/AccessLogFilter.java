package io.registrycache.admin;

import io.registrycache.auth.Identity;
import io.registrycache.proxy.CacheOutcome;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import org.springframework.boot.autoconfigure.condition.ConditionalOnProperty;
import org.springframework.core.Ordered;
import org.springframework.http.HttpStatusCode;
import org.springframework.http.server.reactive.ServerHttpRequest;
import org.springframework.http.server.reactive.ServerHttpResponse;
import org.springframework.stereotype.Component;
import org.springframework.web.server.ServerWebExchange;
import org.springframework.web.server.WebFilter;
import org.springframework.web.server.WebFilterChain;
import reactor.core.publisher.Mono;

/**
 * The structured access log, on when {@code registry-cache.access-log.enabled=true}: one line per
 * {@code /v2} request on the logger {@code registry-cache.access}, at INFO, key=value:
 *
 * <pre>
 * method=GET path=/v2/library/alpine/blobs/sha256:... status=200 bytes=3623807 duration_ms=12 cache=hit upstream=local identity=robot:ci
 * </pre>
 *
 * <ul>
 *   <li>{@code bytes}: the response's {@code Content-Length} (what was declared, not counted —
 *       counting would cost the zero-copy transfer of stored blobs); {@code -} when the length
 *       was not known in advance (a blob streamed while its download runs)
 *   <li>{@code duration_ms}: from the request's arrival to the end of the response body
 *   <li>{@code cache}: {@code hit|miss|stale|error}, recorded by the proxy services through the
 *       Reactor context ({@link CacheOutcome}); {@code -} for requests that reach no cache, such
 *       as {@code /v2/} or a malformed name (then {@code error} when the status is 4xx/5xx)
 *   <li>{@code upstream}: the upstream's configuration key, or {@code -}
 *   <li>{@code identity} (last, after {@code kind} and {@code outcome}): who the request is from, with {@code registry-cache.auth.enabled}:
 *       {@code user:<name>}, {@code robot:<name>} or {@code anonymous} ({@link
 *       Identity#logName()}: a name, never a password or token); {@code -} when auth is off or the
 *       credentials were refused. A name with characters beyond letters, digits and {@code
 *       ._@:-} is quoted, {@code "} and {@code \} escaped
 *   <li>{@code kind=referrers} is added to referrers API requests
 *   <li>{@code outcome=cancelled} is added when the client went away before the end
 * </ul>
 *
 * The query string is not logged (it may carry {@code ns=}, and nothing else of use).
 */
@Component
@ConditionalOnProperty(prefix = "registry-cache.access-log", name = "enabled", havingValue = "true")
public class AccessLogFilter implements WebFilter, Ordered {

  /** The logger name; route it to its own appender in the logging configuration if wanted. */
  public static final String LOGGER = "registry-cache.access";

  private static final Logger log = LoggerFactory.getLogger(LOGGER);

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
        .doFinally(signal -> write(request, exchange.getResponse(), outcome, started, signal,
            exchange.getAttribute(Identity.ATTRIBUTE)));
  }

  private static void write(
      ServerHttpRequest request, ServerHttpResponse response, CacheOutcome outcome, long started,
      reactor.core.publisher.SignalType signal, Identity identity) {
    if (!log.isInfoEnabled()) {
      return;
    }
    HttpStatusCode status = response.getStatusCode();
    int code = status == null ? 200 : status.value();
    long length = response.getHeaders().getContentLength();
    String cache;
    if (outcome.result() != null) {
      cache = outcome.result().name().toLowerCase();
    } else {
      cache = code >= 400 ? "error" : "-";
    }
    String line = "method=" + request.getMethod().name()
        + " path=" + request.getPath().value()
        + " status=" + code
        + " bytes=" + (length >= 0 ? Long.toString(length) : "-")
        + " duration_ms=" + (System.nanoTime() - started) / 1_000_000
        + " cache=" + cache
        + " upstream=" + (outcome.upstream() == null ? "-" : outcome.upstream())
        + (request.getPath().value().contains("/referrers/") ? " kind=referrers" : "")
        + (signal == reactor.core.publisher.SignalType.CANCEL ? " outcome=cancelled" : "")
        + " identity=" + (identity == null ? "-" : value(identity.logName()));
    log.info(line);
  }

  /** {@code text} as a key=value value: as it is when plain, else quoted with {@code "} and {@code \} escaped. */
  static String value(String text) {
    boolean plain = !text.isEmpty() && text.chars().allMatch(c -> (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')
        || (c >= '0' && c <= '9') || c == '.' || c == '_' || c == '@' || c == ':' || c == '-');
    return plain ? text : "\"" + text.replace("\\", "\\\\").replace("\"", "\\\"") + "\"";
  }
}
