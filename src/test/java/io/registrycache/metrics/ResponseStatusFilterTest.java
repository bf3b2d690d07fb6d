package io.registrycache.metrics;

import static org.assertj.core.api.Assertions.assertThat;

import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import io.registrycache.config.RegistryCacheProperties;
import java.util.Map;
import org.junit.jupiter.api.Test;
import org.springframework.http.HttpStatus;
import org.springframework.mock.http.server.reactive.MockServerHttpRequest;
import org.springframework.mock.web.server.MockServerWebExchange;
import reactor.core.publisher.Mono;
import reactor.core.publisher.Sinks;
import reactor.core.publisher.Sinks.Empty;

/** {@link ResponseStatusFilter}: {@code registry_cache_responses_total{status}} for /v2 answers. */
class ResponseStatusFilterTest {

  private final SimpleMeterRegistry registry = new SimpleMeterRegistry();
  private final PullActivity activity = new PullActivity();
  private final ResponseStatusFilter filter =
      new ResponseStatusFilter(
          new CacheMetrics(registry, RegistryCacheProperties.bind(Map.of())), activity);

  private double count(String status) {
    var c = registry.find("registry.cache.responses").tag("status", status).counter();
    return c == null ? 0 : c.count();
  }

  private void answer(String path, HttpStatus status) {
    MockServerWebExchange exchange = MockServerWebExchange.from(MockServerHttpRequest.get(path));
    filter
        .filter(
            exchange,
            ex -> {
              if (status != null) {
                ex.getResponse().setStatusCode(status);
              }
              return Mono.empty();
            })
        .block();
  }

  @Test
  void countsV2AnswersByStatus() {
    answer("/v2/library/alpine/manifests/latest", HttpStatus.OK);
    answer("/v2/library/alpine/manifests/latest", HttpStatus.OK);
    answer("/v2/library/alpine/manifests/nope", HttpStatus.NOT_FOUND);
    answer("/v2/", null);
    answer("/v2/x/blobs/sha256:0", HttpStatus.BAD_GATEWAY);

    assertThat(count("200")).isEqualTo(3);
    assertThat(count("404")).isEqualTo(1);
    assertThat(count("502")).isEqualTo(1);
  }

  @Test
  void ignoresOtherPaths() {
    answer("/actuator/health", HttpStatus.OK);
    answer("/admin/cache", HttpStatus.OK);

    assertThat(registry.find("registry.cache.responses").counters()).isEmpty();
  }

  @Test
  void pullRequestsAreCountedInAndOutButNotTheVersionCheck() {
    answer("/v2/", HttpStatus.OK);
    assertThat(activity.snapshot()).isEqualTo(new PullActivity.Snapshot(0, 0));

    MockServerWebExchange exchange =
        MockServerWebExchange.from(MockServerHttpRequest.get("/v2/x/blobs/sha256:0"));
    Empty<Void> body = Sinks.empty();
    Mono<Void> pending = filter.filter(exchange, ex -> body.asMono());
    var subscription = pending.subscribe();
    assertThat(activity.snapshot()).isEqualTo(new PullActivity.Snapshot(1, 0));
    assertThat(activity.snapshot().idle()).isFalse();

    body.tryEmitEmpty();
    assertThat(activity.snapshot()).isEqualTo(new PullActivity.Snapshot(1, 1));
    assertThat(activity.snapshot().idle()).isTrue();
    subscription.dispose();

    answer("/v2/x/manifests/latest", HttpStatus.NOT_FOUND);
    assertThat(activity.snapshot()).isEqualTo(new PullActivity.Snapshot(2, 2));
  }
}
