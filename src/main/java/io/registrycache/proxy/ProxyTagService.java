package io.registrycache.proxy;

import io.registrycache.metrics.CacheMetrics;
import io.registrycache.oci.RepositoryName;
import io.registrycache.storage.ManifestStore;
import io.registrycache.upstream.Upstream;
import io.registrycache.upstream.UpstreamClient;
import io.registrycache.upstream.UpstreamException;
import java.util.List;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import org.springframework.beans.factory.annotation.Qualifier;
import org.springframework.stereotype.Service;
import reactor.core.publisher.Mono;
import reactor.core.scheduler.Scheduler;

/**
 * Tag listing (OCI Distribution Spec v1.1, "Listing Tags"): passed to the upstream; when the
 * upstream is down or rate-limits, the tags this cache holds for the repository are listed
 * instead, with the same {@code n} / {@code last} paging.
 */
@Service
public class ProxyTagService {

  private static final Logger log = LoggerFactory.getLogger(ProxyTagService.class);

  private final UpstreamClient upstreams;
  private final ManifestStore store;
  private final Scheduler storage;
  private final CacheMetrics metrics;
  private final boolean offline;

  public ProxyTagService(
      UpstreamClient upstreams,
      ManifestStore store,
      @Qualifier("storageScheduler") Scheduler storage,
      CacheMetrics metrics,
      io.registrycache.config.RegistryCacheProperties properties) {
    this.upstreams = upstreams;
    this.store = store;
    this.storage = storage;
    this.metrics = metrics;
    this.offline = properties.isOffline();
  }

  /**
   * A page of tags.
   *
   * @param n page size, or {@code null} for all
   * @param last exclusive lower bound, or {@code null}
   */
  public Mono<TagPage> list(Upstream upstream, RepositoryName name, Integer n, String last) {
    return page(upstream, name, n, last)
        .transform(CacheOutcome.track(
            upstream.key(), p -> p.fromCache() ? CacheMetrics.Result.STALE : CacheMetrics.Result.MISS));
  }

  private Mono<TagPage> page(Upstream upstream, RepositoryName name, Integer n, String last) {
    if (offline) {
      return cached(upstream, name, n, last);
    }
    return upstreams
        .listTags(upstream, name, n, last)
        .map(page -> TagPage.fromUpstream(page.body(), page.link()))
        .onErrorResume(
            UpstreamException.class,
            e -> {
              if (!e.isUnavailable()) {
                return Mono.error(e);
              }
              log.warn("listing cached tags of {}/{}: upstream failed: {}", upstream.key(), name, e.getMessage());
              metrics.staleServed(upstream.key(), e.code().name().toLowerCase());
              return cached(upstream, name, n, last);
            });
  }

  private Mono<TagPage> cached(Upstream upstream, RepositoryName name, Integer n, String last) {
    return Mono.fromCallable(() -> store.tags(upstream.key(), name.value()))
        .subscribeOn(storage)
        .map(all -> TagPage.fromCache(name.value(), all, n, last));
  }

  /**
   * One page of a tag list.
   *
   * @param body JSON body, raw from the upstream or built from the cache
   * @param nextQuery query string ({@code n=..&last=..}) of the next page, or {@code null}
   * @param fromCache whether the upstream was not reachable and the cache answered
   */
  public record TagPage(byte[] body, String nextQuery, boolean fromCache) {

    private static final tools.jackson.databind.json.JsonMapper JSON =
        tools.jackson.databind.json.JsonMapper.builder().build();

    static TagPage fromUpstream(byte[] body, String link) {
      return new TagPage(body, queryOf(link), false);
    }

    static TagPage fromCache(String name, List<String> all, Integer n, String last) {
      List<String> after = last == null ? all : all.stream().filter(t -> t.compareTo(last) > 0).toList();
      List<String> page = n == null ? after : after.subList(0, Math.min(n, after.size()));
      String next = null;
      if (n != null && n > 0 && page.size() < after.size()) {
        next = "n=" + n + "&last=" + page.get(page.size() - 1);
      }
      java.util.Map<String, Object> json = new java.util.LinkedHashMap<>();
      json.put("name", name);
      json.put("tags", page);
      return new TagPage(JSON.writeValueAsBytes(json), next, true);
    }

    /** The query of a {@code Link: <...?n=2&last=b>; rel="next"} header. */
    static String queryOf(String link) {
      if (link == null) {
        return null;
      }
      int open = link.indexOf('<');
      int close = link.indexOf('>', open + 1);
      if (open < 0 || close < 0) {
        return null;
      }
      String target = link.substring(open + 1, close);
      int q = target.indexOf('?');
      return q < 0 ? null : target.substring(q + 1);
    }
  }
}
