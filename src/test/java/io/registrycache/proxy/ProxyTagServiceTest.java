package io.registrycache.proxy;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.mockito.ArgumentMatchers.any;
import static org.mockito.ArgumentMatchers.eq;
import static org.mockito.ArgumentMatchers.isNull;
import static org.mockito.Mockito.mock;
import static org.mockito.Mockito.times;
import static org.mockito.Mockito.verify;
import static org.mockito.Mockito.when;

import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import io.registrycache.config.RegistryCacheProperties;
import io.registrycache.metrics.CacheMetrics;
import io.registrycache.oci.OciErrorCode;
import io.registrycache.oci.OciException;
import io.registrycache.oci.RepositoryName;
import io.registrycache.proxy.ProxyTagService.TagPage;
import io.registrycache.storage.ManifestStore;
import io.registrycache.upstream.Upstream;
import io.registrycache.upstream.UpstreamClient;
import io.registrycache.upstream.UpstreamTags;
import java.net.URI;
import java.nio.charset.StandardCharsets;
import java.time.Clock;
import java.util.Map;
import java.util.Set;
import org.junit.jupiter.api.Test;
import org.springframework.http.HttpStatus;
import reactor.core.publisher.Mono;
import reactor.core.scheduler.Schedulers;

/**
 * How the whole list is fetched from an upstream that pages with its own {@code Link}: the pages
 * are followed (decoded {@code n}/{@code last}), merged, sorted; a looping upstream ends the walk;
 * beyond {@code tag-list-max-tags} the listing fails with {@code UNSUPPORTED} 502.
 */
class ProxyTagServiceTest {

  private RegistryCacheProperties properties = RegistryCacheProperties.defaults();
  private final UpstreamClient client = mock(UpstreamClient.class);
  private final Upstream upstream =
      new Upstream(
          "local",
          "local.test",
          URI.create("http://127.0.0.1:9"),
          Set.of(),
          false,
          RegistryCacheProperties.upstream(Map.of()));
  private final RepositoryName name = RepositoryName.parse("team/app");

  private ProxyTagService service() {
    return new ProxyTagService(
        PullThroughContext.single(
            client,
            Schedulers.immediate(),
            new CacheMetrics(new SimpleMeterRegistry(), properties),
            properties,
            Clock.systemUTC()),
        mock(ManifestStore.class));
  }

  private static Mono<UpstreamTags> page(String tagsJson, String link) {
    return Mono.just(
        new UpstreamTags(
            ("{\"name\":\"team/app\",\"tags\":" + tagsJson + "}").getBytes(StandardCharsets.UTF_8),
            link));
  }

  @Test
  void upstreamPagesAreFollowedMergedAndPagedHere() {
    when(client.listTags(any(), any(), isNull(), isNull()))
        .thenReturn(page("[\"d\",\"b\"]", "</v2/team/app/tags/list?n=2&last=b>; rel=\"next\""));
    when(client.listTags(any(), any(), eq(2), eq("b")))
        .thenReturn(
            page("[\"c\",\"a+1\"]", "</v2/team/app/tags/list?n=2&last=a%2B1>; rel=\"next\""));
    when(client.listTags(any(), any(), eq(2), eq("a+1"))).thenReturn(page("[\"e\"]", null));

    TagPage first = service().list(upstream, name, 3, null).block();
    assertThat(new String(first.body(), StandardCharsets.UTF_8))
        .isEqualTo("{\"name\":\"team/app\",\"tags\":[\"a+1\",\"b\",\"c\"]}");
    assertThat(first.nextQuery()).isEqualTo("n=3&last=c");
    assertThat(first.fromCache()).isFalse();

    TagPage second = service().list(upstream, name, 3, "c").block();
    assertThat(new String(second.body(), StandardCharsets.UTF_8))
        .isEqualTo("{\"name\":\"team/app\",\"tags\":[\"d\",\"e\"]}");
    assertThat(second.nextQuery()).isNull();
  }

  @Test
  void anUpstreamThatLinksInACircleEndsTheWalk() {
    when(client.listTags(any(), any(), any(), any()))
        .thenReturn(page("[\"a\",\"b\"]", "</v2/team/app/tags/list?n=2&last=a>; rel=\"next\""));

    TagPage all = service().list(upstream, name, null, null).block();
    assertThat(new String(all.body(), StandardCharsets.UTF_8))
        .isEqualTo("{\"name\":\"team/app\",\"tags\":[\"a\",\"b\"]}");
    verify(client, times(2)).listTags(any(), any(), any(), any());
  }

  @Test
  void moreTagsThanTheLimitIsAClearError() {
    properties =
        RegistryCacheProperties.bind(Map.of("registry-cache.manifests.tag-list-max-tags", "2"));
    when(client.listTags(any(), any(), any(), any())).thenReturn(page("[\"a\",\"b\",\"c\"]", null));

    assertThatThrownBy(() -> service().list(upstream, name, 1, null).block())
        .isInstanceOfSatisfying(
            OciException.class,
            e -> {
              assertThat(e.code()).isEqualTo(OciErrorCode.UNSUPPORTED);
              assertThat(e.status()).isEqualTo(HttpStatus.BAD_GATEWAY);
              assertThat(e.getMessage())
                  .contains("team/app", "more than 2 tags", "tag-list-max-tags");
            });
  }
}
