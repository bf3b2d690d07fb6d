package io.registrycache.proxy;

import io.registrycache.config.RegistryCacheProperties;
import io.registrycache.metrics.CacheMetrics;
import io.registrycache.metrics.CacheMetrics.Result;
import io.registrycache.oci.Digest;
import io.registrycache.oci.Json;
import io.registrycache.oci.OciErrorCode;
import io.registrycache.oci.OciException;
import io.registrycache.oci.Reference;
import io.registrycache.oci.RepositoryName;
import io.registrycache.signature.SignaturePolicy;
import io.registrycache.storage.ReferrersStore;
import io.registrycache.upstream.Upstream;
import io.registrycache.upstream.UpstreamClient;
import io.registrycache.upstream.UpstreamException;
import java.time.Clock;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.List;
import java.util.Locale;
import java.util.Optional;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import org.springframework.beans.factory.annotation.Autowired;
import org.springframework.http.HttpStatus;
import org.springframework.stereotype.Service;
import reactor.core.publisher.Mono;
import reactor.core.scheduler.Scheduler;
import tools.jackson.core.JacksonException;
import tools.jackson.databind.JsonNode;
import tools.jackson.databind.json.JsonMapper;
import tools.jackson.databind.node.ArrayNode;
import tools.jackson.databind.node.ObjectNode;

/**
 * Referrers (OCI Distribution Spec v1.1, "Listing Referrers"): the descriptors of the manifests
 * whose {@code subject} is a digest, the same answer whether or not the upstream has the API.
 *
 * <ul>
 *   <li>Upstream with the referrers API: every page is fetched (its {@code Link} followed), the
 *       whole list is stored ({@link ReferrersStore}) and served for {@code referrers.ttl}; after
 *       that the upstream is asked again. When it is down or rate-limits, or the cache is offline,
 *       the stored list is served (stale).
 *   <li>Upstream answering 404 on the endpoint: the referrers tag schema ({@code <alg>-<hex>}, an
 *       image index that clients such as oras and cosign maintain) is pulled through like any tag
 *       ({@link ProxyManifestService}, with its tag TTL, revalidation and stale serving); no such
 *       tag is an empty list. That the upstream lacks the API is remembered for the TTL.
 * </ul>
 *
 * Filtering ({@code artifactType}) and paging are done by the caller on the whole list, so they
 * work the same for both sources. A list from the API that differs from the stored one at its
 * refresh makes the signature policy judge the subject again at its next request ({@link
 * SignaturePolicy#referrersChanged}).
 */
@Service
public class ProxyReferrersService {

  private static final Logger log = LoggerFactory.getLogger(ProxyReferrersService.class);
  private static final JsonMapper JSON = Json.MAPPER;
  private static final String INDEX = "application/vnd.oci.image.index.v1+json";

  /** Bound on upstream pages followed for one list (a loop guard). */
  private static final int MAX_PAGES = 1000;

  private final UpstreamClient upstreams;
  private final ProxyManifestService manifests;
  private final ReferrersStore store;
  private final Scheduler storage;
  private final CacheMetrics metrics;
  private final Duration ttl;
  private final boolean offline;
  private final Clock clock;
  private final SingleFlight<String, Mono<Referrers>> fetches = new SingleFlight<>();

  /** The signature policy, or {@code null} when no rule requires signatures. */
  private final SignaturePolicy signatures;

  /**
   * @param manifests where the referrers tag schema's index is pulled through, when the upstream
   *     has no referrers API
   */
  public ProxyReferrersService(
      PullThroughContext context, ProxyManifestService manifests, ReferrersStore store) {
    this(context, manifests, store, SignaturePolicy.none());
  }

  /**
   * As the other constructor, and {@code signatures} is told when a refreshed list differs from the
   * stored one, so a signature added or removed upstream is judged at the next request.
   */
  @Autowired
  public ProxyReferrersService(
      PullThroughContext context,
      ProxyManifestService manifests,
      ReferrersStore store,
      SignaturePolicy signatures) {
    this.signatures = signatures.enabled() ? signatures : null;
    RegistryCacheProperties properties = context.properties();
    this.upstreams = context.upstreams();
    this.manifests = manifests;
    this.store = store;
    this.storage = context.storage();
    this.metrics = context.metrics();
    this.ttl = properties.referrers().ttl();
    this.offline = properties.upstreams().offline();
    this.clock = context.clock();
  }

  /**
   * Every referrer of {@code subject} in {@code name}.
   *
   * @return the descriptors and how the cache answered; errors with {@link UpstreamException} when
   *     the upstream fails and nothing is cached, {@code MANIFEST_INVALID} (502) when the
   *     upstream's list is not an image index
   */
  public Mono<Referrers> list(Upstream upstream, RepositoryName name, Digest subject) {
    return Mono.fromCallable(() -> store.find(upstream.key(), name.value(), subject))
        .subscribeOn(storage)
        .flatMap(cached -> decide(upstream, name, subject, cached))
        .transform(CacheOutcome.track(upstream.key(), Referrers::result));
  }

  private Mono<Referrers> decide(
      Upstream upstream,
      RepositoryName name,
      Digest subject,
      Optional<ReferrersStore.Entry> cached) {
    if (cached.isPresent()) {
      ReferrersStore.Entry entry = cached.get();
      boolean fresh = Duration.between(entry.fetchedAt(), clock.instant()).compareTo(ttl) < 0;
      if (!entry.fromApi() && (fresh || offline)) {
        return fromTag(upstream, name, subject);
      }
      if (entry.fromApi() && (fresh || offline)) {
        return Mono.just(new Referrers(list(entry.manifests()), Result.HIT));
      }
    }
    if (offline) {
      return fromTag(upstream, name, subject);
    }
    String key = upstream.key() + "|" + name + "|" + subject;
    return SingleFlight.shared(fetches, key, () -> fetch(upstream, name, subject, cached));
  }

  private Mono<Referrers> fetch(
      Upstream upstream,
      RepositoryName name,
      Digest subject,
      Optional<ReferrersStore.Entry> cached) {
    return upstreams
        .listReferrers(upstream, name, subject, null)
        .expand(
            page ->
                page.next() == null
                    ? Mono.empty()
                    : upstreams.listReferrers(upstream, name, subject, page.next()))
        .take(MAX_PAGES)
        .map(page -> descriptors(upstream, name, subject, page.body()))
        .collectList()
        .publishOn(storage)
        .map(
            pages -> {
              ArrayNode all = JSON.createArrayNode();
              pages.forEach(all::addAll);
              if (signatures != null
                  && cached.isPresent()
                  && cached.get().fromApi()
                  && !cached.get().manifests().equals(all)) {
                signatures.referrersChanged(upstream.key(), name.value(), subject);
              }
              store.put(
                  upstream.key(),
                  name.value(),
                  subject,
                  new ReferrersStore.Entry(true, all, clock.instant()));
              return new Referrers(list(all), Result.MISS);
            })
        .onErrorResume(
            UpstreamException.class,
            e -> {
              if (e.isNotFound()) {
                log.debug(
                    "{} has no referrers API ({}); using the referrers tag schema",
                    upstream.key(),
                    e.getMessage());
                return Mono.fromRunnable(
                        () ->
                            store.put(
                                upstream.key(),
                                name.value(),
                                subject,
                                new ReferrersStore.Entry(
                                    false, JSON.createArrayNode(), clock.instant())))
                    .subscribeOn(storage)
                    .then(fromTag(upstream, name, subject));
              }
              if (!e.isUnavailable()) {
                return Mono.error(e);
              }
              if (cached.isPresent() && cached.get().fromApi()) {
                log.warn(
                    "serving cached referrers of {}/{}@{} stale: upstream failed: {}",
                    upstream.key(),
                    name,
                    subject,
                    e.getMessage());
                metrics.staleServed(upstream.key(), e.code().name().toLowerCase(Locale.ROOT));
                return Mono.just(new Referrers(list(cached.get().manifests()), Result.STALE));
              }
              // Nothing from the API is cached: the tag schema may be (ProxyManifestService serves
              // it stale), else the upstream's error stands.
              return fromTag(upstream, name, subject)
                  .onErrorResume(OciException.class, t -> Mono.error(e));
            });
  }

  /** The referrers tag schema: tag {@code <alg>-<hex>} holding an image index of the referrers. */
  private Mono<Referrers> fromTag(Upstream upstream, RepositoryName name, Digest subject) {
    Reference.Tag tag = new Reference.Tag(subject.algorithm() + "-" + subject.hex());
    return manifests
        .get(upstream, name, tag, List.of(INDEX))
        .map(
            result ->
                new Referrers(
                    list(descriptors(upstream, name, subject, result.manifest().body())),
                    result.result()))
        .onErrorResume(
            OciException.class,
            e ->
                e.code() == OciErrorCode.MANIFEST_UNKNOWN
                    ? Mono.just(new Referrers(List.of(), offline ? Result.HIT : Result.MISS))
                    : Mono.error(e));
  }

  private static ArrayNode descriptors(
      Upstream upstream, RepositoryName name, Digest subject, byte[] body) {
    try {
      JsonNode manifests = JSON.readTree(body).path("manifests");
      if (manifests instanceof ArrayNode array) {
        return array;
      }
      if (manifests.isMissingNode()) {
        return JSON.createArrayNode();
      }
    } catch (JacksonException e) {
      // reported below
    }
    throw new OciException(
        OciErrorCode.MANIFEST_INVALID,
        HttpStatus.BAD_GATEWAY,
        upstream.key() + "/" + name + ": the referrers of " + subject + " are not an image index");
  }

  private static List<JsonNode> list(JsonNode array) {
    List<JsonNode> out = new ArrayList<>();
    array.forEach(
        d -> {
          if (d instanceof ObjectNode) {
            out.add(d);
          }
        });
    return out;
  }

  /**
   * Every referrer descriptor, in the upstream's order (pages are ordered by digest).
   *
   * @param descriptors OCI descriptors ({@code mediaType}, {@code digest}, {@code size}, {@code
   *     artifactType}, {@code annotations}), as the upstream or the tag schema index gave them
   */
  public record Referrers(List<JsonNode> descriptors, Result result) {

    /**
     * One response page: an image index of the descriptors with {@code artifactType} (when not
     * null), ordered by digest, with digests after {@code last} (when not null), at most {@code
     * pageSize}.
     *
     * @return the index body and the digest to continue after, or null on the last page
     */
    public Page page(String artifactType, String last, int pageSize) {
      List<JsonNode> matching =
          descriptors.stream()
              .filter(
                  d ->
                      artifactType == null
                          || artifactType.equals(d.path("artifactType").asString(null)))
              // By digest: upstreams list in no stable order (go-containerregistry's changes per
              // call), and a list fetched again between two pages must still page without gaps or
              // repeats.
              .sorted(Comparator.comparing((JsonNode d) -> d.path("digest").asString("")))
              .toList();
      int from = 0;
      if (last != null) {
        // Strictly after last in digest order: also right when last has been removed meanwhile.
        while (from < matching.size()
            && matching.get(from).path("digest").asString("").compareTo(last) <= 0) {
          from++;
        }
      }
      int to = Math.min(matching.size(), from + Math.max(1, pageSize));
      ObjectNode index = JSON.createObjectNode();
      index.put("schemaVersion", 2);
      index.put("mediaType", INDEX);
      ArrayNode page = index.putArray("manifests");
      matching.subList(from, to).forEach(page::add);
      String next =
          to < matching.size() ? matching.get(to - 1).path("digest").asString(null) : null;
      return new Page(JSON.writeValueAsBytes(index), next);
    }
  }

  /**
   * One page of a referrers list.
   *
   * @param body the image index JSON
   * @param nextAfter the digest of this page's last descriptor when more follow, else null
   */
  @SuppressWarnings("ArrayRecordComponent") // a carrier of bytes, never compared or hashed
  public record Page(byte[] body, String nextAfter) {}
}
