package io.registrycache.management;

import java.util.Map;
import java.util.Optional;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicLong;
import org.springframework.boot.test.context.TestConfiguration;
import org.springframework.context.annotation.Bean;
import org.springframework.core.Ordered;
import org.springframework.core.annotation.Order;
import org.springframework.web.reactive.HandlerMapping;
import org.springframework.web.server.WebFilter;
import org.springframework.web.util.pattern.PathPattern;
import reactor.core.publisher.Mono;

/**
 * Which handler WebFlux chose for a request, as the request pattern it matched ({@code
 * /actuator/cache/{what}}), read from the exchange once the request is done: the oracle of the
 * management port's tests for "an anonymous request reached a protected endpoint", taken from the
 * routing itself rather than from the access rules under test. A web filter of the main context,
 * which the management server's context runs as well; it wraps every other filter, Spring
 * Security's included, and looks only at requests that carry {@link #HEADER}.
 */
@TestConfiguration(proxyBeanMethods = false)
class HandlerProbe {

  static final String HEADER = "X-Test-Probe";

  /** Probe id → matched pattern ("" when no handler matched), set when the request completes. */
  private static final Map<String, String> reached = new ConcurrentHashMap<>();

  private static final AtomicLong ids = new AtomicLong();

  static String nextId() {
    return Long.toString(ids.incrementAndGet());
  }

  /**
   * The pattern the request with probe {@code id} matched, or empty when it matched none (refused
   * before routing, no such route, or never handed to WebFlux). Asked once the answer is read: the
   * filter records before the answer is committed; one short wait more covers a request that
   * WebFlux never saw.
   */
  static Optional<String> matchedPattern(String id) throws InterruptedException {
    if (!reached.containsKey(id)) {
      Thread.sleep(20);
    }
    String pattern = reached.remove(id);
    return pattern == null || pattern.isEmpty() ? Optional.empty() : Optional.of(pattern);
  }

  @Bean
  @Order(Ordered.HIGHEST_PRECEDENCE)
  WebFilter handlerProbeFilter() {
    return (exchange, chain) -> {
      String id = exchange.getRequest().getHeaders().getFirst(HEADER);
      if (id == null) {
        return chain.filter(exchange);
      }
      Runnable record =
          () -> {
            Object pattern = exchange.getAttribute(HandlerMapping.BEST_MATCHING_PATTERN_ATTRIBUTE);
            reached.put(
                id,
                pattern instanceof PathPattern p
                    ? p.getPatternString()
                    : pattern == null ? "" : pattern.toString());
          };
      // Before the first byte of the answer leaves (routing is decided by then).
      exchange.getResponse().beforeCommit(() -> Mono.fromRunnable(record));
      return chain.filter(exchange);
    };
  }
}
