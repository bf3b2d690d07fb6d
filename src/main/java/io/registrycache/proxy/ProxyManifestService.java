package io.registrycache.proxy;

import com.github.benmanes.caffeine.cache.Cache;
import com.github.benmanes.caffeine.cache.Caffeine;
import io.registrycache.cluster.Member;
import io.registrycache.config.PolicyProperties.Rule;
import io.registrycache.config.RegistryCacheProperties;
import io.registrycache.metrics.CacheMetrics;
import io.registrycache.metrics.CacheMetrics.Result;
import io.registrycache.oci.Digest;
import io.registrycache.oci.ManifestContent;
import io.registrycache.oci.MediaTypes;
import io.registrycache.oci.OciErrorCode;
import io.registrycache.oci.OciException;
import io.registrycache.oci.Reference;
import io.registrycache.oci.RepositoryName;
import io.registrycache.policy.PlatformPolicy;
import io.registrycache.signature.SignaturePolicy;
import io.registrycache.storage.ContentVerificationException;
import io.registrycache.storage.ManifestStore;
import io.registrycache.storage.StoredManifest;
import io.registrycache.storage.TagRef;
import io.registrycache.upstream.Upstream;
import io.registrycache.upstream.UpstreamClient;
import io.registrycache.upstream.UpstreamException;
import io.registrycache.upstream.UpstreamManifest;
import java.time.Clock;
import java.time.Duration;
import java.util.List;
import java.util.Locale;
import java.util.Optional;
import java.util.function.Supplier;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import org.springframework.beans.factory.annotation.Autowired;
import org.springframework.http.HttpStatus;
import org.springframework.http.InvalidMediaTypeException;
import org.springframework.http.MediaType;
import org.springframework.stereotype.Service;
import reactor.core.publisher.Mono;
import reactor.core.scheduler.Scheduler;

/**
 * Pull-through for manifests: serve from the cache when it may, else fetch from the upstream once
 * (single-flight), verify, keep, serve.
 *
 * <ul>
 *   <li>By digest: immutable; a stored manifest is always served, never revalidated.
 *   <li>By tag: the tag link is served for {@code tag-ttl}; after that a HEAD to the upstream
 *       revalidates it. If the upstream is down or rate-limits, the cached manifest is served stale
 *       (logged, counted).
 *   <li>Content negotiation: the upstream is always asked for every manifest media type; a tag's
 *       manifest is served when the client accepts its media type (or sent no {@code Accept}),
 *       otherwise the answer is {@code MANIFEST_UNKNOWN} (404), as the distribution registry's.
 *   <li>Verification: sha256 (or the requested algorithm) of the exact bytes must equal the
 *       requested digest and the upstream's {@code Docker-Content-Digest}; the body must be a
 *       manifest no larger than {@code manifests.max-size-bytes}. Otherwise nothing is kept and the
 *       client gets {@code MANIFEST_INVALID} with 502.
 * </ul>
 */
@Service
public class ProxyManifestService {

  private static final Logger log = LoggerFactory.getLogger(ProxyManifestService.class);

  private final UpstreamClient upstreams;
  private final ManifestStore store;
  private final Scheduler storage;
  private final CacheMetrics metrics;
  private final TagFreshness freshness;
  private final int maxBytes;
  private final boolean offline;

  /**
   * {@code registry-cache.rate-limit.enabled}: whether a client's request carries {@link
   * FillPermits}.
   */
  private final boolean fillLimits;

  private final PeerSource peers; // null for a single replica: no request enters peer code
  private final Prefetcher prefetcher;

  /** {@code blobs.prefetch.enabled}, read once: off, a fetch never enters the prefetcher. */
  private final boolean prefetching;

  private final PlatformCheck platforms;
  private final SignaturePolicy signatures;

  /** Whether any policy rule is set: without one, the manifest path never asks the policy. */
  private final boolean policed;

  // decided once: with no signature rule a pull does not enter the signature package
  private final boolean signaturesPoliced;

  /**
   * Image manifests fetched without their blobs (an index's child for a platform left out of {@code
   * blobs.prefetch.platforms}): a client that asks for one prefetches them then.
   */
  private final Cache<Digest, Boolean> withoutLayers =
      Caffeine.newBuilder().maximumSize(10_000).expireAfterWrite(Duration.ofMinutes(10)).build();

  private final SingleFlight<String, Mono<StoredManifest>> fetches = new SingleFlight<>();
  private final SingleFlight<String, Mono<ManifestResult>> revalidations = new SingleFlight<>();

  /** A single replica's service that prefetches nothing (for services built without Spring). */
  public ProxyManifestService(PullThroughContext context, ManifestStore store) {
    this(context, store, Prefetcher.none());
  }

  /** A service without policy (for services built without Spring). */
  public ProxyManifestService(
      PullThroughContext context, ManifestStore store, Prefetcher prefetcher) {
    this(context, store, prefetcher, PlatformCheck.none(), SignaturePolicy.none());
  }

  /**
   * @param context the upstream client, storage pool, metrics, settings, clock and peers (where
   *     misses and revalidations of manifests owned by another replica go)
   * @param prefetcher where manifests fetched from the upstream send their blobs ahead of the
   *     client
   * @param platforms the platform policy ({@code registry-cache.policy})
   * @param signatures the signature policy ({@code registry-cache.policy})
   */
  @Autowired
  public ProxyManifestService(
      PullThroughContext context,
      ManifestStore store,
      Prefetcher prefetcher,
      PlatformCheck platforms,
      SignaturePolicy signatures) {
    this.platforms = platforms;
    this.signatures = signatures;
    this.policed = platforms.policy().enabled();
    this.signaturesPoliced = signatures.enabled();
    RegistryCacheProperties properties = context.properties();
    Clock clock = context.clock();
    this.peers = context.peers().clustered() ? context.peers() : null;
    this.prefetcher = prefetcher;
    this.prefetching = prefetcher.enabled();
    this.upstreams = context.upstreams();
    this.store = store;
    this.storage = context.storage();
    this.metrics = context.metrics();
    this.freshness =
        new TagFreshness(properties.manifests().tagTtl(), clock, properties.upstreams().offline());
    this.maxBytes = properties.manifests().maxSizeBytes();
    this.offline = properties.upstreams().offline();
    this.fillLimits = properties.rateLimit().enabled();
  }

  /**
   * The manifest {@code name:reference} from {@code upstream}, from the cache when possible.
   *
   * @param accept the media types the client accepts, from its {@code Accept} header; empty when it
   *     sent none
   * @return the manifest and whether it was a hit, a miss or served stale; errors with {@link
   *     OciException} ({@code MANIFEST_UNKNOWN} 404, {@code MANIFEST_INVALID} 502, {@code DENIED}
   *     403 for a platform {@code registry-cache.policy} leaves out or an image without a signature
   *     its rule accepts, upstream errors as {@link UpstreamException})
   */
  public Mono<ManifestResult> get(
      Upstream upstream, RepositoryName name, Reference reference, List<String> accept) {
    return get(upstream, name, reference, accept, false);
  }

  /**
   * {@link #get} for preloading, every media type accepted: the same pull-through, without prefetch
   * on manifest (preload fetches what it chose itself: {@code preload.platforms} says which
   * children of an index it wants).
   */
  public Mono<ManifestResult> getForPreload(
      Upstream upstream, RepositoryName name, Reference reference) {
    return get(upstream, name, reference, MediaTypes.ALL_MANIFESTS, false)
        .contextWrite(context -> context.put(NO_PREFETCH, true));
  }

  /** Reactor context key: a fetch under it starts no prefetch. */
  private static final String NO_PREFETCH = "registry-cache.no-prefetch";

  /**
   * {@link #get} for another replica's peer request, every media type accepted: the same
   * pull-through, except that a miss or a revalidation always goes to the upstream, never to a
   * third replica, so peer requests cannot loop.
   */
  public Mono<ManifestResult> getForPeer(
      Upstream upstream, RepositoryName name, Reference reference) {
    return get(upstream, name, reference, List.of(), true);
  }

  private Mono<ManifestResult> get(
      Upstream upstream,
      RepositoryName name,
      Reference reference,
      List<String> accept,
      boolean forPeer) {
    Mono<ManifestResult> result =
        reference instanceof Reference.ByDigest byDigest
            ? byDigest(upstream, name, byDigest, forPeer)
            : byTag(upstream, name, (Reference.Tag) reference, forPeer)
                .flatMap(r -> negotiate(upstream, name, reference, r, accept));
    // A peer's request is judged by the replica its client asked, which knows the verdict: an
    // owner's DENIED would only send that replica to the upstream itself.
    Rule rule = policed && !forPeer ? platforms.ruleFor(upstream, name) : null;
    if (rule != null) {
      result =
          platforms
              .police(rule, upstream, name, reference, result)
              .doOnNext(r -> layersHeldForPolicy(upstream, name, r));
    }
    // A manifest stored before its rule existed, or whose verdict is past its TTL, is judged
    // here; one just fetched was judged before it was stored, and its verdict is in memory.
    Rule signed =
        !forPeer && signaturesPoliced ? signatures.ruleFor(upstream.key(), name.value()) : null;
    if (signed != null) {
      result =
          result.flatMap(
              r ->
                  signatures
                      .check(
                          signed,
                          upstream,
                          name,
                          r.manifest().digest(),
                          r.manifest().body(),
                          what(upstream, name, reference))
                      .thenReturn(r));
    }
    return result;
  }

  /**
   * An image manifest the policy allowed whose layers' prefetch waited (for its verdict, {@link
   * #prefetch}, or for a client asking for it): prefetched now.
   */
  private void layersHeldForPolicy(Upstream upstream, RepositoryName name, ManifestResult result) {
    Digest digest = result.manifest().digest();
    if (withoutLayers.estimatedSize() == 0 || withoutLayers.asMap().remove(digest) == null) {
      return;
    }
    Mono.fromRunnable(
            () ->
                store
                    .content(digest)
                    .ifPresent(content -> prefetcher.imageManifest(upstream, name, content)))
        .subscribeOn(storage)
        .subscribe(null, e -> log.debug("prefetch of {} failed: {}", digest, e.toString()));
  }

  /**
   * Content negotiation for a tag, as the distribution registry does it: the manifest is served
   * when the client accepts its media type, else {@code MANIFEST_UNKNOWN} (404). The upstream is
   * always asked for every manifest type, so a client's narrow {@code Accept} never reaches it. A
   * digest is served whatever the {@code Accept}: the client named the exact bytes.
   */
  private static Mono<ManifestResult> negotiate(
      Upstream upstream,
      RepositoryName name,
      Reference reference,
      ManifestResult result,
      List<String> accept) {
    String type = result.manifest().mediaType().value();
    if (acceptable(type, accept)) {
      return Mono.just(result);
    }
    return Mono.error(
        OciException.manifestUnknown(
            upstream.key()
                + "/"
                + name
                + ":"
                + reference
                + " is a "
                + type
                + ", which the client's Accept "
                + accept
                + " leaves out"));
  }

  private Mono<ManifestResult> byDigest(
      Upstream upstream, RepositoryName name, Reference.ByDigest reference, boolean forPeer) {
    boolean servable =
        store
            .links()
            .servable(reference.digest(), upstream.key(), name.value(), upstream.passthrough());
    Optional<StoredManifest> inMemory =
        servable ? store.cached(reference.digest()) : Optional.empty();
    if (inMemory.isPresent()) {
      // under a policy rule, only once the manifest is allowed (layersHeldForPolicy)
      if (!forPeer
          && withoutLayers.estimatedSize() > 0
          && !(policed && platforms.ruleFor(upstream, name) != null)
          && withoutLayers.asMap().remove(reference.digest()) != null) {
        Mono.fromRunnable(
                () ->
                    store
                        .content(reference.digest())
                        .ifPresent(content -> prefetcher.imageManifest(upstream, name, content)))
            .subscribeOn(storage)
            .subscribe(null, e -> log.debug("prefetch of {} failed: {}", reference, e.toString()));
      }
      return Mono.just(new ManifestResult(inMemory.get(), Result.HIT));
    }
    return Mono.fromCallable(() -> store.find(reference.digest()))
        .subscribeOn(storage)
        .flatMap(
            found -> {
              if (found.isEmpty()) {
                Supplier<Optional<StoredManifest>> storedMeanwhile =
                    () ->
                        store
                                .links()
                                .servable(
                                    reference.digest(),
                                    upstream.key(),
                                    name.value(),
                                    upstream.passthrough())
                            ? store.cached(reference.digest())
                            : Optional.empty();
                return fetch(upstream, name, reference, forPeer, storedMeanwhile, true)
                    .map(m -> new ManifestResult(m, Result.MISS));
              }
              if (servable) {
                return Mono.just(new ManifestResult(found.get(), Result.HIT));
              }
              return confirm(upstream, name, reference, found.get());
            });
  }

  /**
   * A manifest stored, but not for this repository (or upstream) ({@code storage.content-scope}):
   * served when another replica on a shared store linked it there since start-up (one request to
   * the store, on this storage thread), otherwise only once this upstream confirms it has it there,
   * with a {@code HEAD} and that upstream's credentials; then linked. Offline, it is not there.
   */
  private Mono<ManifestResult> confirm(
      Upstream upstream, RepositoryName name, Reference.ByDigest reference, StoredManifest stored) {
    if (store
        .links()
        .recheck(stored.digest(), upstream.key(), name.value(), upstream.passthrough())) {
      return Mono.just(new ManifestResult(stored, Result.HIT));
    }
    if (offline) {
      return Mono.error(
          OciException.manifestUnknown(
              upstream.key()
                  + "/"
                  + name
                  + ":"
                  + reference
                  + " is not cached there and the cache is offline"));
    }
    return upstreams
        .headManifest(upstream, name, reference, MediaTypes.ALL_MANIFESTS)
        .publishOn(storage)
        .map(
            head -> {
              if (head.digest() != null && !head.digest().equals(stored.digest())) {
                throw OciException.manifestUnknown(
                    upstream.key()
                        + "/"
                        + name
                        + ":"
                        + reference
                        + ": the upstream answered another digest "
                        + head.digest());
              }
              store.links().link(stored.digest(), upstream.key(), name.value());
              return new ManifestResult(stored, Result.HIT);
            });
  }

  private Mono<ManifestResult> byTag(
      Upstream upstream, RepositoryName name, Reference.Tag tag, boolean forPeer) {
    // A warm tag (link and manifest both in memory) is answered on the calling thread; only a
    // lookup that may read the disk or the object store goes to the storage scheduler.
    Optional<CachedTag> inMemory =
        store
            .cachedTag(upstream.key(), name.value(), tag)
            .flatMap(link -> store.cached(link.digest()).map(m -> new CachedTag(link, m)));
    Mono<Optional<CachedTag>> lookup =
        inMemory.isPresent()
            ? Mono.just(inMemory)
            : Mono.fromCallable(() -> cachedTag(upstream, name, tag)).subscribeOn(storage);
    return lookup.flatMap(
        cached -> {
          if (cached.isEmpty()) {
            Supplier<Optional<StoredManifest>> storedMeanwhile =
                () ->
                    store
                        .cachedTag(upstream.key(), name.value(), tag)
                        .flatMap(link -> store.cached(link.digest()));
            return fetch(upstream, name, tag, forPeer, storedMeanwhile, true)
                .map(m -> new ManifestResult(m, Result.MISS));
          }
          CachedTag hit = cached.get();
          if (freshness.of(hit.link()) == TagFreshness.Verdict.FRESH) {
            return Mono.just(new ManifestResult(hit.manifest(), Result.HIT));
          }
          String key =
              upstream.key() + "|" + name + "|" + tag.name() + (forPeer ? "|for-peer" : "");
          return SingleFlight.shared(
              revalidations, key, () -> revalidate(upstream, name, tag, hit, forPeer));
        });
  }

  private record CachedTag(TagRef link, StoredManifest manifest) {}

  private Optional<CachedTag> cachedTag(Upstream upstream, RepositoryName name, Reference.Tag tag) {
    return store
        .findTag(upstream.key(), name.value(), tag)
        .flatMap(link -> store.find(link.digest()).map(m -> new CachedTag(link, m)));
  }

  /**
   * A tag past its {@code tag-ttl}: a {@code HEAD} to the upstream, or, when another replica owns
   * the tag, a {@code GET} of the owner's manifest for it (the owner revalidates at most once per
   * {@code tag-ttl} for every replica, so a tag seen here is at most twice that old).
   */
  private Mono<ManifestResult> revalidate(
      Upstream upstream,
      RepositoryName name,
      Reference.Tag tag,
      CachedTag cached,
      boolean forPeer) {
    Digest current = cached.manifest().digest();
    Mono<ManifestResult> check =
        !forPeer
                && !upstream.passthrough()
                && peers != null
                && peers.manifestOwnerElsewhere(upstream, name, tag).isPresent()
            ? fetch(upstream, name, tag, false, Optional::empty, true)
                .map(
                    m ->
                        new ManifestResult(
                            m, m.digest().equals(current) ? Result.HIT : Result.MISS))
            : upstreams
                .headManifest(upstream, name, tag, MediaTypes.ALL_MANIFESTS)
                .flatMap(
                    head -> {
                      if (current.equals(head.digest())) {
                        return Mono.fromRunnable(
                                () ->
                                    store.touchTag(
                                        upstream.key(),
                                        name.value(),
                                        tag,
                                        freshness.confirmedNow()))
                            .subscribeOn(storage)
                            .thenReturn(new ManifestResult(cached.manifest(), Result.HIT));
                      }
                      log.info(
                          "tag {}/{}:{} moved upstream from {} to {}",
                          upstream.key(),
                          name,
                          tag,
                          current,
                          head.digest());
                      return fetch(upstream, name, tag, forPeer, Optional::empty, true)
                          .map(m -> new ManifestResult(m, Result.MISS));
                    });
    return check.onErrorResume(
        UpstreamException.class,
        e -> {
          if (e.isNotFound()) {
            log.info(
                "tag {}/{}:{} is gone upstream; dropping the cached link",
                upstream.key(),
                name,
                tag);
            return Mono.fromRunnable(() -> store.deleteTag(upstream.key(), name.value(), tag))
                .subscribeOn(storage)
                .then(Mono.error(e));
          }
          if (!TagFreshness.servesStale(e)) {
            return Mono.error(e);
          }
          log.warn(
              "serving cached {}/{}:{} ({}) stale: upstream failed revalidation: {}",
              upstream.key(),
              name,
              tag,
              cached.manifest().digest(),
              e.getMessage());
          metrics.staleServed(upstream.key(), e.code().name().toLowerCase(Locale.ROOT));
          return Mono.just(new ManifestResult(cached.manifest(), Result.STALE));
        });
  }

  /**
   * One fetch per reference at a time (single-flight), from the upstream or, when another replica
   * owns the reference and this is not a peer's request, from that owner (which falls back to the
   * upstream); verified and stored either way.
   *
   * @param storedMeanwhile for a miss: the manifest if a fetch stored it since this request looked
   *     (in memory, asked again when joining the single-flight), so it is served instead of fetched
   *     a second time; {@code Optional::empty} for a revalidation, which must fetch
   * @param layers whether the blobs of an image manifest fetched now are prefetched (false for the
   *     child manifest of an index whose platform {@code blobs.prefetch.platforms} leaves out)
   */
  private Mono<StoredManifest> fetch(
      Upstream upstream,
      RepositoryName name,
      Reference reference,
      boolean forPeer,
      Supplier<Optional<StoredManifest>> storedMeanwhile,
      boolean layers) {
    if (offline) {
      return Mono.error(
          OciException.manifestUnknown(
              upstream.key()
                  + "/"
                  + name
                  + ":"
                  + reference
                  + " is not cached and the cache is offline"));
    }
    // Nothing from the upstream is stored before the signature policy allows it: a peer's request
    // too, so no replica stores what its rule refuses.
    Rule signed = signaturesPoliced ? signatures.ruleFor(upstream.key(), name.value()) : null;
    // A pass-through upstream is fetched here, with this client's credentials, which no peer has.
    Optional<Member> owner =
        forPeer || upstream.passthrough() || peers == null
            ? Optional.empty()
            : peers.manifestOwnerElsewhere(upstream, name, reference);
    Supplier<Mono<UpstreamManifest>> fromUpstream =
        () -> upstreams.getManifest(upstream, name, reference, MediaTypes.ALL_MANIFESTS, maxBytes);
    // As for blobs: a peer's request never joins a fetch that waits on a peer, so two replicas
    // that disagree on the owner cannot wait on each other.
    String key =
        upstream.key() + "|" + name + "|" + reference + (owner.isPresent() ? "|via-owner" : "");
    // A client's request starts a fetch only within its identity's limit (FillPermits in its
    // context); one that joins a fetch in flight takes no permit. Peers' requests carry none.
    return Mono.deferContextual(
        requestContext ->
            SingleFlight.shared(
                fetches,
                key,
                storedMeanwhile,
                forPeer || !fillLimits ? null : FillPermits.of(requestContext),
                () ->
                    Mono.deferContextual(
                        context -> {
                          // A peer's request is not prefetched for: the replica its client asked
                          // does it, through the blobs' owners, so the cluster still fetches each
                          // blob once.
                          boolean prefetch =
                              prefetching && !forPeer && !context.hasKey(NO_PREFETCH);
                          long started = System.nanoTime();
                          return (owner.isEmpty()
                                  ? fromUpstream.get()
                                  : peers.fetchManifest(
                                      owner.get(),
                                      upstream,
                                      name,
                                      reference,
                                      maxBytes,
                                      fromUpstream))
                              .doOnSubscribe(s -> metrics.fetchInFlight(1))
                              .doFinally(s -> metrics.fetchInFlight(-1))
                              .map(response -> verify(upstream, name, reference, response))
                              .flatMap(
                                  verified ->
                                      signed == null
                                          ? Mono.just(verified)
                                          : signatures
                                              .check(
                                                  signed,
                                                  upstream,
                                                  name,
                                                  verified.manifest().digest(),
                                                  verified.manifest().body(),
                                                  what(upstream, name, reference))
                                              .thenReturn(verified))
                              .map(
                                  verified ->
                                      prefetch
                                              && prefetcher.worthIt(
                                                  upstream.key(),
                                                  Duration.ofNanos(System.nanoTime() - started))
                                          ? verified.withPrefetch()
                                          : verified)
                              .publishOn(storage)
                              .map(verified -> keep(upstream, name, reference, verified, layers));
                        })));
  }

  /**
   * Stores a manifest just fetched and verified (unless an equal one is in memory), links it to the
   * repository, points the tag at it, and starts prefetch on manifest when it is worth it. On the
   * storage scheduler.
   */
  private StoredManifest keep(
      Upstream upstream,
      RepositoryName name,
      Reference reference,
      Verified verified,
      boolean layers) {
    StoredManifest manifest = verified.manifest();
    if (store
        .cached(manifest.digest())
        .isEmpty()) { // a revalidation through the owner: often the same bytes
      store.put(manifest, verified.content());
      // Prefetch hides round trips: worth it only where the manifest took one.
      if (verified.prefetch()) {
        prefetch(upstream, name, manifest, verified.content(), layers);
      }
    }
    store.links().link(manifest.digest(), upstream.key(), name.value());
    if (reference instanceof Reference.Tag tag) {
      store.putTag(upstream.key(), name.value(), tag, manifest.digest(), freshness.confirmedNow());
    }
    log.debug(
        "stored manifest {}/{}:{} {} ({}, {} bytes)",
        upstream.key(),
        name,
        reference,
        manifest.digest(),
        manifest.mediaType(),
        manifest.body().length);
    return manifest;
  }

  /** A manifest as received and checked: its bytes and what they reference, parsed once. */
  private record Verified(StoredManifest manifest, ManifestContent content, boolean prefetch) {
    Verified withPrefetch() {
      return new Verified(manifest, content, true);
    }
  }

  private Verified verify(
      Upstream upstream, RepositoryName name, Reference reference, UpstreamManifest response) {
    String what = upstream.key() + "/" + name + ":" + reference;
    byte[] body = response.body();
    ManifestContent content;
    try {
      content = ManifestContent.parse(body, response.mediaType());
    } catch (OciException e) {
      throw new OciException(
          OciErrorCode.MANIFEST_INVALID, HttpStatus.BAD_GATEWAY, what + ": " + e.getMessage());
    }
    // The bytes are hashed once, when the manifest is made (StoredManifest checks its digest):
    // against the digest asked for, else the upstream's Docker-Content-Digest, else their own.
    Digest announced = response.upstreamDigest();
    Digest expected =
        reference instanceof Reference.ByDigest byDigest
            ? byDigest.digest()
            : announced != null ? announced : Digest.sha256(body);
    StoredManifest manifest;
    try {
      manifest = new StoredManifest(expected, content.mediaType(), body);
    } catch (ContentVerificationException e) {
      throw lying(
          what,
          expected.equals(announced)
              ? "the manifest bytes do not match the upstream's Docker-Content-Digest " + announced
              : "the manifest bytes do not have the requested digest " + expected);
    }
    if (announced != null && !announced.equals(expected)) {
      // Asked by digest, and the upstream announced another one for the same bytes: a lie unless
      // it is the same bytes under another algorithm.
      if (announced.algorithm().equals(expected.algorithm())
          || !announced.recompute(body).equals(announced)) {
        throw lying(
            what,
            "the manifest bytes do not match the upstream's Docker-Content-Digest " + announced);
      }
    }
    return new Verified(manifest, content, false);
  }

  /**
   * Prefetch on manifest, for a manifest just fetched and stored: an image manifest's blobs (when
   * {@code layers}), an index's child manifests (each with its layers when its platform is in
   * {@code blobs.prefetch.platforms}). In the background; a failure costs nothing but the prefetch.
   */
  private void prefetch(
      Upstream upstream,
      RepositoryName name,
      StoredManifest manifest,
      ManifestContent content,
      boolean layers) {
    if (!prefetcher.enabled()) {
      return;
    }
    Digest digest = manifest.digest();
    Rule rule = policed ? platforms.ruleFor(upstream, name) : null;
    PlatformPolicy policy = platforms.policy();
    if (!content.isIndex()) {
      // Under a platform policy, layers wait until the manifest's platform is known to be allowed.
      if (layers
          && (rule == null
              || policy.known(digest).filter(p -> p.isEmpty() || rule.allows(p)).isPresent())) {
        prefetcher.imageManifest(upstream, name, content);
      } else {
        withoutLayers.put(digest, Boolean.TRUE); // a client asking for it later prefetches them
      }
      return;
    }
    if (rule != null) {
      policy.readIndex(digest, manifest.body());
    }
    for (ManifestContent.Descriptor child : content.references()) {
      Reference.ByDigest reference = new Reference.ByDigest(child.digest());
      if (store.entry(child.digest()).isPresent()
          || (rule != null && policy.refuses(rule, child.digest()))) {
        continue;
      }
      Supplier<Optional<StoredManifest>> storedMeanwhile =
          () ->
              store
                      .links()
                      .servable(
                          child.digest(), upstream.key(), name.value(), upstream.passthrough())
                  ? store.cached(child.digest())
                  : Optional.empty();
      fetch(
              upstream,
              name,
              reference,
              false,
              storedMeanwhile,
              prefetcher.layersOf(child.platform()))
          .subscribe(
              null,
              e ->
                  log.debug(
                      "prefetch of {}/{}@{} failed: {}",
                      upstream.key(),
                      name,
                      child.digest(),
                      e.toString()));
    }
  }

  private static String what(Upstream upstream, RepositoryName name, Reference reference) {
    return upstream.key()
        + "/"
        + name
        + (reference instanceof Reference.ByDigest ? "@" : ":")
        + reference;
  }

  private static OciException lying(String what, String why) {
    log.warn("upstream sent a bad manifest for {}: {}; nothing kept", what, why);
    return new OciException(
        OciErrorCode.MANIFEST_INVALID,
        HttpStatus.BAD_GATEWAY,
        "upstream manifest for " + what + " rejected: " + why);
  }

  /**
   * Whether a client that sent {@code accept} (media ranges, parameters allowed) takes {@code
   * mediaType}; no {@code Accept} at all takes anything. Unparseable ranges are skipped.
   */
  static boolean acceptable(String mediaType, List<String> accept) {
    if (accept.isEmpty()) {
      return true;
    }
    MediaType type = MediaType.parseMediaType(mediaType);
    for (String range : accept) {
      try {
        if (MediaType.parseMediaType(range).includes(type)) {
          return true;
        }
      } catch (InvalidMediaTypeException e) {
        // a malformed range accepts nothing
      }
    }
    return false;
  }
}
