package io.registrycache.proxy;

import io.registrycache.config.RegistryCacheProperties;
import io.registrycache.metrics.CacheMetrics;
import io.registrycache.oci.Json;
import io.registrycache.oci.LinkHeader;
import io.registrycache.oci.OciErrorCode;
import io.registrycache.oci.OciException;
import io.registrycache.oci.RepositoryName;
import io.registrycache.storage.ManifestStore;
import io.registrycache.upstream.Upstream;
import io.registrycache.upstream.UpstreamClient;
import io.registrycache.upstream.UpstreamException;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.SortedSet;
import java.util.TreeSet;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import org.springframework.http.HttpStatus;
import org.springframework.stereotype.Service;
import org.springframework.util.LinkedMultiValueMap;
import org.springframework.util.MultiValueMap;
import org.springframework.web.util.UriComponentsBuilder;
import org.springframework.web.util.UriUtils;
import reactor.core.publisher.Mono;
import reactor.core.scheduler.Scheduler;
import tools.jackson.core.JacksonException;
import tools.jackson.databind.JsonNode;
import tools.jackson.databind.json.JsonMapper;

/**
 * Tag listing (OCI Distribution Spec v1.1, "Listing Tags"): tags in lexical order, {@code n} and
 * {@code last} honoured, a {@code next} link while more remain. Upstreams differ (some ignore
 * {@code n}/{@code last}, some answer unsorted, some page with their own {@code Link}), so the
 * whole list is fetched from the upstream, following its pages, and paged here; at most {@code
 * registry-cache.manifests.tag-list-max-tags} tags. When the upstream is down or rate-limits, the
 * tags this cache holds for the repository are listed instead, paged the same way.
 */
@Service
public class ProxyTagService {

  private static final Logger log = LoggerFactory.getLogger(ProxyTagService.class);
  private static final JsonMapper JSON = Json.MAPPER;

  private final UpstreamClient upstreams;
  private final ManifestStore store;
  private final Scheduler storage;
  private final CacheMetrics metrics;
  private final boolean offline;
  private final int maxTags;

  public ProxyTagService(PullThroughContext context, ManifestStore store) {
    RegistryCacheProperties properties = context.properties();
    this.upstreams = context.upstreams();
    this.store = store;
    this.storage = context.storage();
    this.metrics = context.metrics();
    this.offline = properties.upstreams().offline();
    this.maxTags = properties.manifests().tagListMaxTags();
  }

  /**
   * A page of tags.
   *
   * @param n page size, or {@code null} for all
   * @param last exclusive lower bound, or {@code null}
   * @return the page; fails with {@code UNSUPPORTED} (502) when the upstream lists more than the
   *     configured maximum of tags, with the upstream's error otherwise
   */
  public Mono<TagPage> list(Upstream upstream, RepositoryName name, Integer n, String last) {
    return page(upstream, name, n, last)
        .transform(
            CacheOutcome.track(
                upstream.key(),
                p -> p.fromCache() ? CacheMetrics.Result.STALE : CacheMetrics.Result.MISS));
  }

  private Mono<TagPage> page(Upstream upstream, RepositoryName name, Integer n, String last) {
    if (offline) {
      return cached(upstream, name, n, last);
    }
    return Mono.defer(() -> collect(upstream, name, null, null, new TreeSet<>()))
        .map(all -> TagPage.of(name.value(), all, n, last, false))
        .onErrorResume(
            UpstreamException.class,
            e -> {
              if (!e.isUnavailable()) {
                return Mono.error(e);
              }
              log.warn(
                  "listing cached tags of {}/{}: upstream failed: {}",
                  upstream.key(),
                  name,
                  e.getMessage());
              metrics.staleServed(upstream.key(), e.code().name().toLowerCase(Locale.ROOT));
              return cached(upstream, name, n, last);
            });
  }

  /** All tags of the repository at the upstream, following its {@code Link} pages. */
  private Mono<SortedSet<String>> collect(
      Upstream upstream, RepositoryName name, Integer n, String last, SortedSet<String> all) {
    return upstreams
        .listTags(upstream, name, n, last)
        .flatMap(
            page -> {
              int before = all.size();
              all.addAll(tagsOf(upstream, name, page.body()));
              if (all.size() > maxTags) {
                return Mono.error(
                    new OciException(
                        OciErrorCode.UNSUPPORTED,
                        HttpStatus.BAD_GATEWAY,
                        "the tag list of "
                            + name
                            + " at upstream "
                            + upstream.key()
                            + " has more than "
                            + maxTags
                            + " tags (registry-cache.manifests.tag-list-max-tags)"));
              }
              MultiValueMap<String, String> next = nextOf(page.link());
              // a page that adds nothing ends the walk: an upstream cannot send us round in circles
              if (next == null || all.size() == before) {
                return Mono.just(all);
              }
              String nextN = next.getFirst("n");
              Integer size = nextN == null ? null : parseOrNull(nextN);
              return collect(upstream, name, size, next.getFirst("last"), all);
            });
  }

  private static List<String> tagsOf(Upstream upstream, RepositoryName name, byte[] body) {
    try {
      JsonNode tags = JSON.readTree(body).path("tags");
      List<String> out = new ArrayList<>();
      tags.forEach(t -> out.add(t.asString()));
      return out;
    } catch (JacksonException e) {
      throw new UpstreamException(
          upstream.key(),
          OciErrorCode.UPSTREAM_UNAVAILABLE,
          HttpStatus.BAD_GATEWAY,
          "upstream " + upstream.key() + " answered a tag list of " + name + " that is not JSON",
          null,
          e);
    }
  }

  /** The decoded query of the upstream's {@code next} link, or {@code null}. */
  static MultiValueMap<String, String> nextOf(String link) {
    String query = TagPage.queryOf(link);
    if (query == null) {
      return null;
    }
    MultiValueMap<String, String> raw =
        UriComponentsBuilder.newInstance().query(query).build().getQueryParams();
    MultiValueMap<String, String> decoded = new LinkedMultiValueMap<>();
    raw.forEach(
        (k, values) ->
            values.forEach(
                v ->
                    decoded.add(k, v == null ? null : UriUtils.decode(v, StandardCharsets.UTF_8))));
    return decoded;
  }

  private static Integer parseOrNull(String value) {
    try {
      return Integer.valueOf(value);
    } catch (NumberFormatException e) {
      return null;
    }
  }

  private Mono<TagPage> cached(Upstream upstream, RepositoryName name, Integer n, String last) {
    return Mono.fromCallable(() -> store.tags(upstream.key(), name.value()))
        .subscribeOn(storage)
        .map(all -> TagPage.of(name.value(), new TreeSet<>(all), n, last, true));
  }

  /**
   * One page of a tag list.
   *
   * @param body JSON body {@code {"name":..., "tags":[...]}}
   * @param nextQuery query string ({@code n=..&last=..}, encoded) of the next page, or {@code null}
   * @param fromCache whether the upstream was not reachable and the cache answered
   */
  @SuppressWarnings("ArrayRecordComponent") // a carrier of bytes, never compared or hashed
  public record TagPage(byte[] body, String nextQuery, boolean fromCache) {

    /**
     * The page of {@code all} after {@code last} (exclusive), at most {@code n} tags, in lexical
     * order; a next query while more remain.
     */
    static TagPage of(
        String name, SortedSet<String> all, Integer n, String last, boolean fromCache) {
      SortedSet<String> after = last == null ? all : all.tailSet(last + "\0");
      List<String> page = new ArrayList<>(n == null ? after.size() : Math.min(n, after.size()));
      for (String tag : after) {
        if (n != null && page.size() >= n) {
          break;
        }
        page.add(tag);
      }
      String next = null;
      if (n != null && n > 0 && page.size() < after.size()) {
        next =
            UriComponentsBuilder.newInstance()
                .queryParam("n", n)
                .queryParam("last", "{last}")
                .encode()
                .buildAndExpand(Map.of("last", page.get(page.size() - 1)))
                .getQuery();
      }
      Map<String, Object> json = new LinkedHashMap<>();
      json.put("name", name);
      json.put("tags", page);
      return new TagPage(JSON.writeValueAsBytes(json), next, fromCache);
    }

    /** Paging of a list in any order: sorted and de-duplicated first. */
    static TagPage fromCache(String name, List<String> all, Integer n, String last) {
      return of(name, new TreeSet<>(all), n, last, true);
    }

    /** The query of a {@code Link: <...?n=2&last=b>; rel="next"} header. */
    static String queryOf(String link) {
      return LinkHeader.nextTarget(link)
          .map(target -> target.indexOf('?') < 0 ? null : target.substring(target.indexOf('?') + 1))
          .orElse(null);
    }
  }
}
