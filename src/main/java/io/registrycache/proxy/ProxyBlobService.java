package io.registrycache.proxy;

import com.github.benmanes.caffeine.cache.Cache;
import com.github.benmanes.caffeine.cache.Caffeine;
import com.github.benmanes.caffeine.cache.RemovalCause;
import io.registrycache.cluster.Member;
import io.registrycache.config.ContentScope;
import io.registrycache.config.RegistryCacheProperties;
import io.registrycache.metrics.CacheMetrics;
import io.registrycache.oci.Digest;
import io.registrycache.oci.OciException;
import io.registrycache.oci.RepositoryName;
import io.registrycache.storage.BlobStore;
import io.registrycache.storage.ContentLinks;
import io.registrycache.storage.StoredContent;
import io.registrycache.tracing.PullSpan;
import io.registrycache.upstream.Upstream;
import io.registrycache.upstream.UpstreamBlob;
import io.registrycache.upstream.UpstreamClient;
import java.time.Duration;
import java.util.Optional;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.function.Supplier;
import org.springframework.context.SmartLifecycle;
import org.springframework.stereotype.Service;
import reactor.core.publisher.Flux;
import reactor.core.publisher.Mono;
import reactor.core.scheduler.Scheduler;

/**
 * Pull-through for blobs: a stored blob is served from disk; otherwise one download per digest is
 * started (or joined) and the client tails it while it arrives. A blob is stored once, but served
 * only where it may be ({@code storage.content-scope}, {@link ContentLinks}): a blob stored for
 * another repository (or upstream) is first confirmed with a {@code HEAD} to this request's
 * upstream and repository, with that upstream's credentials, then linked and served from disk;
 * downloads are shared only within one scope.
 *
 * <p>With replicas ({@code registry-cache.cluster.*}), a miss of a blob owned by another replica is
 * filled from that owner ({@link PeerSource}) rather than from the upstream — unless the store,
 * when shared (S3 API), already holds the owner's copy: that is asked first ({@link
 * BlobStore#recheck}, one {@code HEAD}), and then served from there; requests from peers ({@link
 * #getForPeer}) are always filled from the upstream, so a request never travels on.
 *
 * <p>On shutdown, once the server stopped answering, downloads in flight are let finish: a client
 * gets its last byte when the blob is verified, before the commit (fsync and rename, or upload), so
 * a pull that just ended may still be committing. Spring's {@code
 * spring.lifecycle.timeout-per-shutdown-phase} (30 s by default) bounds the wait; a download cut
 * off then keeps nothing.
 */
@Service
public class ProxyBlobService implements SmartLifecycle {

  private final UpstreamClient upstreams;
  private final BlobStore store;
  private final CacheMetrics metrics;
  private final SingleFlight<String, Fill> downloads = new SingleFlight<>();
  private final SingleFlight<Digest, Mono<Boolean>> rechecks = new SingleFlight<>();
  private final Scheduler storage;

  /** {@code blobs.orphan-download-timeout}, read once. */
  private final Duration orphanTimeout;

  /** {@code blobs.resume-attempts}, read once. */
  private final int resumeAttempts;

  /** The direct buffers responses stream fills from: one budget for every download. */
  private final ReaderBuffers readerBuffers;

  private final boolean offline;

  /** The other replicas, or {@code null} for a single replica (no request enters peer code). */
  private final PeerSource peers;

  /** Whether pulls are traced: off, no request enters the tracing classes. */
  private final boolean traced;

  /**
   * Prefetched blobs (digest|scope) no client has asked for; expiring counts them as prefetched in
   * vain.
   */
  private final Cache<String, Unrequested> unrequested;

  private volatile boolean running;

  /**
   * Prefetch fills in the single-flight now (a stored blob is looked for among them only when some
   * are).
   */
  private final AtomicInteger prefetchFills = new AtomicInteger();

  /**
   * {@code registry-cache.rate-limit.enabled}: whether a client's request carries {@link
   * FillPermits}.
   */
  private final boolean fillLimits;

  /**
   * @param context the upstream client, storage pool, metrics, settings and peers every service
   *     shares
   */
  public ProxyBlobService(PullThroughContext context, BlobStore store) {
    RegistryCacheProperties properties = context.properties();
    CacheMetrics metrics = context.metrics();
    this.peers = context.peers().clustered() ? context.peers() : null;
    this.traced = context.tracing().enabled();
    this.upstreams = context.upstreams();
    this.store = store;
    this.metrics = metrics;
    this.storage = context.storage();
    this.orphanTimeout = properties.blobs().orphanDownloadTimeout();
    this.resumeAttempts = properties.blobs().resumeAttempts();
    this.readerBuffers = new ReaderBuffers(properties.blobs().fillResponseMemory());
    this.unrequested =
        Caffeine.newBuilder()
            .maximumSize(100_000)
            .expireAfterWrite(properties.blobs().prefetch().unrequestedAfter())
            .scheduler(com.github.benmanes.caffeine.cache.Scheduler.systemScheduler())
            .<String, Unrequested>removalListener(
                (key, value, cause) -> {
                  if (cause == RemovalCause.EXPIRED && value != null) {
                    metrics.prefetchUnrequested(value.upstream(), value.size());
                  }
                })
            .build();
    this.offline = properties.upstreams().offline();
    this.fillLimits = properties.rateLimit().enabled();
  }

  /** Who asks for a blob. */
  private enum Asker {
    /** A client on the pull port. */
    CLIENT,
    /** Another replica (never forwarded to a third). */
    PEER,
    /** Prefetch on manifest (counts no hit or miss; a client that joins it is a prefetch hit). */
    PREFETCH
  }

  /** What a client asks of a blob, which decides whether a download in progress may be tailed. */
  public enum Want {
    /** The whole body: tailed while it arrives (a bad digest aborts the connection). */
    BODY,
    /** A range: it would end cleanly before the digest is checked, so only verified bytes. */
    RANGE,
    /** Headers only: the size is needed, so a download without an announced size is waited for. */
    HEAD
  }

  /**
   * Where to read blob {@code digest} from. A miss starts (or joins) the upstream download and
   * completes once the upstream answered with its headers — or, when {@code want} cannot be served
   * from a download in progress, once the blob is verified and stored.
   *
   * @return a {@link BlobSource.Stored} on a hit (or after waiting), a {@link
   *     BlobSource.Downloading} on a miss; errors with the upstream's failure ({@code BLOB_UNKNOWN}
   *     404, 502/503/504, ...) when the download could not start or failed
   */
  public Mono<BlobSource> get(Upstream upstream, RepositoryName name, Digest digest, Want want) {
    return get(upstream, name, digest, want, Asker.CLIENT);
  }

  /**
   * {@link #get} of the whole body for another replica's peer request: the same pull-through
   * (stored and linked, confirmed, or one shared download), except that a miss is always filled
   * from the upstream, never from a third replica, so peer requests cannot loop.
   */
  public Mono<BlobSource> getForPeer(Upstream upstream, RepositoryName name, Digest digest) {
    return get(upstream, name, digest, Want.BODY, Asker.PEER);
  }

  private Mono<BlobSource> get(
      Upstream upstream, RepositoryName name, Digest digest, Want want, Asker asker) {
    // With rate limits on, a client's request may start a fill only within its identity's limit
    // (FillPermits in its context). With tracing on, the request's span is in its context too: a
    // fill this request starts is traced under it (docs/tracing.md).
    return Mono.deferContextual(
        context -> {
          BlobRequest request =
              new BlobRequest(
                  upstream,
                  name,
                  digest,
                  asker,
                  fillLimits && asker == Asker.CLIENT ? FillPermits.of(context) : null,
                  traced ? PullSpan.of(context) : null);
          return lookup(request)
              .flatMap(
                  source ->
                      source instanceof BlobSource.Downloading d
                              && (want == Want.RANGE || (want == Want.HEAD && d.size() < 0))
                          // served only once stored: looked up again then, as fetched for this
                          // request
                          ? d.stored()
                              .then(lookup(request))
                              .map(
                                  again ->
                                      again instanceof BlobSource.Stored st
                                          ? new BlobSource.Stored(st.content(), true)
                                          : again)
                          : Mono.just(source));
        });
  }

  /**
   * Starts (or joins) the fill of a blob that a manifest just fetched from the upstream references,
   * before any client asks for it (prefetch on manifest): the same single-flight, content scope and
   * owner replica as a client's request, so a client asking meanwhile joins it. A blob stored
   * already is left alone (not even confirmed with the upstream).
   *
   * @return completes with the blob's size once it is stored and linked, empty when there was
   *     nothing to do; errors as the fill does
   */
  public Mono<Long> prefetch(Upstream upstream, RepositoryName name, Digest digest) {
    if (offline || store.size(digest).isPresent()) {
      return Mono.empty();
    }
    return lookup(new BlobRequest(upstream, name, digest, Asker.PREFETCH, null, null))
        .flatMap(
            source -> source instanceof BlobSource.Downloading d ? d.stored() : Mono.<Long>empty());
  }

  /** {@link #get} of the whole body. */
  public Mono<BlobSource> get(Upstream upstream, RepositoryName name, Digest digest) {
    return get(upstream, name, digest, Want.BODY);
  }

  /**
   * One request for a blob, as it goes down the pull-through.
   *
   * @param permits the requesting identity's fill permits, or {@code null} for no limit
   * @param trace the request's span, or {@code null}
   */
  private record BlobRequest(
      Upstream upstream,
      RepositoryName name,
      Digest digest,
      Asker asker,
      FillPermits permits,
      PullSpan trace) {}

  /**
   * Where to read the blob from: one {@link Lookup} step after another, each looking at the store
   * and the fills as they are now, until one has an answer. A step that changed what the next one
   * sees (a link made, the shared store asked, a fill that ended meanwhile) ends empty, and the
   * lookup looks again; nothing calls back up.
   */
  private Mono<BlobSource> lookup(BlobRequest request) {
    return Mono.defer(
        () -> {
          Lookup lookup = new Lookup(request);
          // a hit answers from the first step; only a step that ends empty pays for the repeat
          return lookup
              .step()
              .switchIfEmpty(Mono.defer(lookup::step).repeatWhenEmpty(again -> again));
        });
  }

  /** The state of one lookup across its steps. */
  private final class Lookup {
    private final BlobRequest r;

    /** The shared store was asked for the owner's copy already (one {@code HEAD} per lookup). */
    private boolean storeRechecked;

    Lookup(BlobRequest request) {
      this.r = request;
    }

    /** The blob's source, or empty to look again. */
    Mono<BlobSource> step() {
      Upstream upstream = r.upstream();
      Digest digest = r.digest();
      Optional<StoredContent> stored = store.open(digest);
      if (stored.isPresent()) {
        if (store
            .links()
            .servable(digest, upstream.key(), r.name().value(), upstream.passthrough())) {
          if (r.asker() == Asker.CLIENT
              && (unrequested.estimatedSize() > 0 || prefetchFills.get() > 0)
              && takePrefetched(digest + "|" + scopeKey(upstream, r.name()))) {
            metrics.prefetchHit(upstream.key());
            return Mono.just(
                new BlobSource.Stored(stored.get(), true)); // fetched for this pull: a miss
          }
          return Mono.just(new BlobSource.Stored(stored.get()));
        }
        return confirm();
      }
      if (offline) {
        return Mono.error(
            OciException.blobUnknown(digest + " is not cached and the cache is offline"));
      }
      // A fill from an owner and one from the upstream are different calls: a peer's request never
      // joins a fill that waits on a peer (two replicas that disagree on the owner cannot
      // deadlock). A pass-through upstream is filled here, with this client's credentials, which no
      // peer has.
      Optional<Member> owner =
          r.asker() == Asker.PEER || upstream.passthrough() || peers == null
              ? Optional.empty()
              : peers.ownerElsewhere(digest);
      if (owner.isPresent() && !storeRechecked) {
        // The owner stores what it fills; in a shared store its copy may be there already (one
        // HEAD).
        storeRechecked = true;
        return SingleFlight.shared(rechecks, digest, () -> store.recheck(digest))
            .publishOn(storage)
            .then(Mono.empty());
      }
      return fill(owner);
    }

    /**
     * A blob stored, but not for this repository (or upstream): served when another replica on a
     * shared store linked it there since start-up (one request to the store), otherwise only once
     * this upstream confirms it has it there (then linked). Offline, it is not there.
     */
    private Mono<BlobSource> confirm() {
      Upstream upstream = r.upstream();
      String repository = r.name().value();
      Digest digest = r.digest();
      return Mono.fromCallable(
              () ->
                  store.links().recheck(digest, upstream.key(), repository, upstream.passthrough()))
          .subscribeOn(storage)
          .flatMap(
              linked -> {
                if (linked) {
                  return Mono.empty();
                }
                if (offline) {
                  return Mono.error(
                      OciException.blobUnknown(
                          digest
                              + " is not cached for "
                              + upstream.key()
                              + "/"
                              + r.name()
                              + " and the cache is offline"));
                }
                return upstreams
                    .headBlob(upstream, r.name(), digest)
                    .switchIfEmpty(
                        Mono.error(
                            () ->
                                OciException.blobUnknown(
                                    digest
                                        + " is not confirmed by "
                                        + upstream.key()
                                        + "/"
                                        + r.name())))
                    .publishOn(storage)
                    .doOnNext(confirmed -> store.links().link(digest, upstream.key(), repository))
                    .then(Mono.empty());
              });
    }

    /** Joins the fill of the blob, or starts one; empty when it was stored meanwhile. */
    private Mono<BlobSource> fill(Optional<Member> owner) {
      Upstream upstream = r.upstream();
      Digest digest = r.digest();
      String fromUpstream = digest + "|" + scopeKey(upstream, r.name());
      String key = fromUpstream + owner.map(m -> "|from " + m.id()).orElse("");
      // A client's (or prefetch's) request joins any fill of the blob here, wherever it reads from:
      // the owner seen may have changed meanwhile (one suspected), and two fills would fetch twice.
      // Only a peer's request keeps to fills from the upstream, so replicas never wait on each
      // other.
      Fill fill =
          r.asker() == Asker.PEER || peers == null
              ? null
              : downloads.current(
                  k -> k.equals(fromUpstream) || k.startsWith(fromUpstream + "|from "));
      // A fill stores (and links) its blob before it leaves the single-flight, so a blob missing
      // above but stored now was filled meanwhile: looked up again, not fetched a second time.
      FillPermits permits = r.permits();
      boolean[] refused = {false};
      if (fill == null) {
        fill =
            downloads.join(
                key,
                k -> {
                  if (store.size(digest).isPresent()) {
                    return null;
                  }
                  // Only the request that starts the fill takes a permit (under the map's lock,
                  // never blocking).
                  if (permits != null && !permits.tryAcquire()) {
                    refused[0] = true;
                    return null;
                  }
                  try {
                    return newFill(r, k, owner);
                  } catch (RuntimeException e) {
                    if (permits != null) {
                      permits.release();
                    }
                    throw e;
                  }
                },
                Fill::start);
      }
      if (refused[0]) {
        return Mono.error(permits.refused());
      }
      if (fill == null) {
        return Mono.empty();
      }
      if (r.asker() != Asker.PREFETCH && !fill.requested) {
        fill.requested = true;
        if (fill.byPrefetch) {
          metrics.prefetchHit(upstream.key());
        }
      }
      Fill joined = fill;
      if (r.trace() != null && joined.download.trace() != r.trace()) {
        waiting(r.trace(), joined);
      }
      return joined
          .download
          .announcedSize()
          .map(
              announced ->
                  new BlobSource.Downloading(digest, joined.download, announced, joined.stored));
    }
  }

  /**
   * A span {@code blob wait} under {@code trace}, for a request that joined a fill another request
   * (or prefetch) started: from the join until that fill stored its blob or failed.
   */
  private static void waiting(PullSpan trace, Fill joined) {
    PullSpan wait =
        trace
            .child("blob wait")
            .tag(
                "registry.fill.started_by",
                joined.byPrefetch
                    ? "prefetch"
                    : joined.download.trace() == null ? "untraced request" : "another request");
    joined.stored.doOnError(wait::error).doFinally(signal -> wait.end()).subscribe(null, e -> {});
  }

  /**
   * Whether a stored blob was prefetched and no client asked for it yet (and marks it asked for):
   * either listed as unrequested, or its prefetch fill is still finishing — the blob is visible
   * from its rename on, while the fill lists it as unrequested only once it completed, and a client
   * in between must count as a prefetch hit (a miss), not a plain hit.
   */
  private boolean takePrefetched(String fromUpstream) {
    if (unrequested.asMap().remove(fromUpstream) != null) {
      return true;
    }
    if (prefetchFills.get() == 0) {
      return false;
    }
    Fill fill =
        downloads.current(k -> k.equals(fromUpstream) || k.startsWith(fromUpstream + "|from "));
    if (fill == null || !fill.byPrefetch || fill.requested) {
      return false;
    }
    fill.requested = true;
    unrequested.asMap().remove(fromUpstream); // listed meanwhile by the completing fill
    return true;
  }

  /** Downloads of one digest are shared only by requests that may see each other's content. */
  private String scopeKey(Upstream upstream, RepositoryName name) {
    // A pass-through upstream's clients may see different repositories: its content is per
    // repository.
    ContentScope scope = upstream.passthrough() ? ContentScope.REPOSITORY : store.links().scope();
    return switch (scope) {
      case REPOSITORY -> upstream.key() + "/" + name.value();
      case UPSTREAM -> upstream.key();
      case SHARED -> "";
    };
  }

  /**
   * A fill of the request's blob, under single-flight {@code key}: the request's permit is given
   * back when it ends; it is traced under the request's span, if any (its upstream or owner
   * requests, its body and its commit).
   */
  private Fill newFill(BlobRequest r, String key, Optional<Member> owner) {
    Upstream upstream = r.upstream();
    RepositoryName name = r.name();
    Digest digest = r.digest();
    Asker asker = r.asker();
    FillPermits permits = r.permits();
    PullSpan trace = r.trace();
    BlobDownload.Source source =
        owner.isEmpty()
            ? (offset, ownerGaveUp) -> upstreams.getBlob(upstream, name, digest, offset)
            // When the owner gives up, the bytes come from the upstream here, and no owner stores
            // them; the rest of a transfer that broke off comes from the upstream too.
            : (offset, ownerGaveUp) -> {
              Supplier<Mono<UpstreamBlob>> fromUpstream =
                  () -> {
                    ownerGaveUp.run();
                    return upstreams.getBlob(upstream, name, digest, offset);
                  };
              return offset == 0
                  ? peers.fetch(owner.get(), upstream, name, digest, fromUpstream)
                  : fromUpstream.get();
            };
    BlobDownload download =
        new BlobDownload(
            digest,
            upstream.key() + "/" + name + "@" + digest,
            // The store links the blob to this repository in its commit, before it is visible.
            () -> store.newWriter(digest, owner.isPresent(), upstream.key(), name.value()),
            source,
            storage,
            readerBuffers,
            orphanTimeout,
            resumeAttempts);
    download.traced(trace);
    Fill fill = new Fill(key, download, asker == Asker.PREFETCH, permits);
    if (fill.byPrefetch) {
      fill.stored.subscribe(
          size -> {
            metrics.prefetched(upstream.key(), size);
            if (!fill.requested) {
              unrequested.put(
                  digest + "|" + scopeKey(upstream, name), new Unrequested(upstream.key(), size));
            }
          },
          e -> {});
    }
    return fill;
  }

  /** A prefetched blob no client has asked for yet. */
  private record Unrequested(String upstream, long size) {}

  /**
   * A download in the single-flight, and what its requesters wait on: the blob stored and linked
   * where it was fetched for; only then does it leave the single-flight.
   */
  private final class Fill {
    final BlobDownload download;
    final Mono<Long> stored;

    /** Started by prefetch on manifest rather than by a request. */
    final boolean byPrefetch;

    /** A client or a peer has asked for it. */
    volatile boolean requested;

    Fill(String key, BlobDownload download, boolean byPrefetch, FillPermits permits) {
      this.download = download;
      this.byPrefetch = byPrefetch;
      this.stored =
          download
              .completion()
              .doFinally(
                  signal -> {
                    downloads.finished(key, this);
                    if (byPrefetch) {
                      prefetchFills.decrementAndGet();
                    }
                    metrics.fetchInFlight(-1);
                    if (permits != null) {
                      permits.release();
                    }
                  })
              .cache();
    }

    void start() {
      if (byPrefetch) {
        prefetchFills.incrementAndGet();
      }
      metrics.fetchInFlight(1);
      download.start();
      stored.subscribe(null, e -> {});
    }
  }

  @Override
  public void start() {
    running = true;
  }

  @Override
  public boolean isRunning() {
    return running;
  }

  /**
   * After the web server's stop ({@code DEFAULT_PHASE - 2048}), so no request starts a new
   * download.
   */
  @Override
  public int getPhase() {
    return SmartLifecycle.DEFAULT_PHASE - 4096;
  }

  @Override
  public void stop() {
    awaitDownloads().block();
  }

  @Override
  public void stop(Runnable callback) {
    awaitDownloads().subscribe(null, e -> callback.run(), callback);
  }

  /** Completes when every download in flight now has committed or failed. */
  private Mono<Void> awaitDownloads() {
    running = false;
    return Flux.fromIterable(downloads.inFlight())
        .flatMap(f -> f.stored.onErrorResume(e -> Mono.empty()))
        .then();
  }

  /** Number of blob downloads in flight. */
  public int downloadsInFlight() {
    return downloads.size();
  }

  /** Whether {@code digest} is stored (verified and complete). */
  public boolean isStored(Digest digest) {
    return store.size(digest).isPresent();
  }
}
