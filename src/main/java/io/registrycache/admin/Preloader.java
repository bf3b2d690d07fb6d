package io.registrycache.admin;

import io.micrometer.core.instrument.Counter;
import io.micrometer.core.instrument.MeterRegistry;
import io.registrycache.api.RequestTarget;
import io.registrycache.config.PolicyProperties.Rule;
import io.registrycache.config.PreloadProperties;
import io.registrycache.config.RegistryCacheProperties;
import io.registrycache.metrics.CacheMetrics;
import io.registrycache.oci.Digest;
import io.registrycache.oci.ManifestContent;
import io.registrycache.oci.ManifestContent.Descriptor;
import io.registrycache.oci.OciException;
import io.registrycache.oci.Reference;
import io.registrycache.policy.PlatformPolicy;
import io.registrycache.proxy.BlobSource;
import io.registrycache.proxy.ProxyBlobService;
import io.registrycache.proxy.ProxyManifestService;
import io.registrycache.proxy.ProxyReferrersService;
import io.registrycache.startup.AotTraining;
import io.registrycache.storage.StoredManifest;
import io.registrycache.upstream.Upstreams;
import java.io.IOException;
import java.nio.file.Path;
import java.time.Clock;
import java.util.ArrayList;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Set;
import java.util.UUID;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.RejectedExecutionException;
import java.util.concurrent.TimeUnit;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import org.springframework.beans.factory.DisposableBean;
import org.springframework.boot.context.event.ApplicationReadyEvent;
import org.springframework.context.event.EventListener;
import org.springframework.core.io.buffer.DataBufferUtils;
import org.springframework.stereotype.Component;
import reactor.core.publisher.Flux;
import reactor.core.publisher.Mono;

/**
 * Pulls images into the cache before any client asks for them, through the very path a client's
 * pull takes: {@link ProxyManifestService#get} with every manifest media type accepted, for an
 * image index each chosen platform's manifest by digest, then every blob with {@link
 * ProxyBlobService#get}, waiting for the download to be verified and stored on a miss. Nothing is
 * written any other way, so what is preloaded is verified, shared and evicted like everything else.
 *
 * <ul>
 *   <li><b>Sources</b>: the admin API ({@code POST /actuator/cache/preload}) and the file {@code
 *       registry-cache.preload.file}, read in the background once the service is ready (it never
 *       delays readiness).
 *   <li><b>Concurrency</b>: jobs run one after another on the thread {@code preload}; within a job
 *       {@code registry-cache.preload.concurrency} images at a time; the manifests and blobs of one
 *       image one after another. Clients are served meanwhile; a client pulling the same blob joins
 *       the same download.
 *   <li><b>Idempotent and resumable</b>: what is cached is a hit and costs no upstream request (a
 *       tag older than {@code manifests.tag-ttl} costs one HEAD); a failed reference fails alone,
 *       and running the list again continues where it stopped, blob by blob.
 *   <li><b>Observability</b>: one log line per image ({@code done} or {@code failed}, bytes);
 *       {@code registry_cache_preload_images_total{result="done|failed"}} and {@code
 *       registry_cache_preload_bytes_total} (bytes fetched from upstreams by preloading); the last
 *       {@value #JOBS_KEPT} jobs at {@code GET /actuator/cache/preload}.
 * </ul>
 */
@Component
public class Preloader implements DisposableBean {

  private static final Logger log = LoggerFactory.getLogger(Preloader.class);

  /** How many jobs (finished or not) the admin API reports; older finished ones are forgotten. */
  public static final int JOBS_KEPT = 20;

  private final ProxyManifestService manifests;
  private final ProxyBlobService blobs;
  private final ProxyReferrersService referrers;
  private final PlatformPolicy policy;
  private final Upstreams upstreams;
  private final PreloadProperties settings;
  private final Clock clock;
  private final Counter imagesDone;
  private final Counter imagesFailed;
  private final Counter fetchedBytes;
  private final Map<String, PreloadJob> jobs = new LinkedHashMap<>();
  private final ExecutorService worker =
      Executors.newSingleThreadExecutor(
          r -> {
            Thread t = new Thread(r, "preload");
            t.setDaemon(true);
            return t;
          });

  public Preloader(
      ProxyManifestService manifests,
      ProxyBlobService blobs,
      Upstreams upstreams,
      RegistryCacheProperties properties,
      MeterRegistry meters,
      Clock clock,
      ProxyReferrersService referrers,
      PlatformPolicy policy) {
    this.referrers = referrers;
    this.policy = policy;
    this.manifests = manifests;
    this.blobs = blobs;
    this.upstreams = upstreams;
    this.settings = properties.preload();
    this.clock = clock;
    this.imagesDone = images(meters, "done");
    this.imagesFailed = images(meters, "failed");
    this.fetchedBytes =
        Counter.builder("registry.cache.preload.bytes")
            .baseUnit("bytes")
            .description("Bytes of manifests and blobs fetched from upstreams by preloading")
            .register(meters);
  }

  private static Counter images(MeterRegistry meters, String result) {
    return Counter.builder("registry.cache.preload.images")
        .description("Image references preloaded, by result")
        .tag("result", result)
        .register(meters);
  }

  /**
   * Checks a list of references without running anything: every one must parse and name a registry
   * host this cache serves.
   *
   * @return one message per bad reference; empty when all are fine
   */
  public List<String> check(List<String> references) {
    List<String> errors = new ArrayList<>();
    for (String r : references) {
      try {
        PreloadReference ref = PreloadReference.parse(r);
        RequestTarget checked = RequestTarget.resolve(ref.rawName(), null, upstreams);
        checked.upstream().requirePullThrough(checked.name());
      } catch (OciException e) {
        errors.add(r + ": " + e.getMessage());
      }
    }
    return errors;
  }

  /**
   * Queues a job and returns at once.
   *
   * @param references image references ({@link PreloadReference} syntax); duplicates are dropped
   * @param platforms which platforms of an index to take
   * @param source {@code api} or {@code file:<path>}, for the job listing
   */
  public PreloadJob submit(List<String> references, PreloadPlatforms platforms, String source) {
    List<String> unique = references.stream().map(String::strip).distinct().toList();
    PreloadJob job =
        new PreloadJob(
            UUID.randomUUID().toString().substring(0, 8), source, unique, platforms, clock);
    synchronized (jobs) {
      jobs.put(job.id(), job);
      forgetOldJobs();
    }
    try {
      worker.execute(() -> run(job));
    } catch (RejectedExecutionException e) {
      job.items().forEach(i -> i.failed("the service is shutting down"));
      job.markFinished();
    }
    return job;
  }

  private void forgetOldJobs() {
    var it = jobs.values().iterator();
    while (jobs.size() > JOBS_KEPT && it.hasNext()) {
      if (it.next().state() == PreloadJob.State.DONE) {
        it.remove();
      }
    }
  }

  /** The jobs kept, newest first. */
  public List<PreloadJob> jobs() {
    synchronized (jobs) {
      List<PreloadJob> out = new ArrayList<>(jobs.values());
      Collections.reverse(out);
      return out;
    }
  }

  /** One job by id. */
  public Optional<PreloadJob> job(String id) {
    synchronized (jobs) {
      return Optional.ofNullable(jobs.get(id));
    }
  }

  /** Reads {@code registry-cache.preload.file} in the background once the service is ready. */
  @EventListener(ApplicationReadyEvent.class)
  public void preloadFileOnStartUp() {
    Path file = settings.file();
    if (file == null || AotTraining.requested()) {
      return; // the AOT cache's training run pulls nothing but its synthetic images
    }
    PreloadPlatforms platforms;
    try {
      platforms = PreloadPlatforms.of(settings.platforms());
    } catch (IllegalArgumentException e) {
      log.error(
          "registry-cache.preload.platforms: {}; the preload file is not loaded", e.getMessage());
      return;
    }
    try {
      worker.execute(
          () -> {
            List<String> references;
            try {
              references = PreloadFile.read(file);
            } catch (IOException e) {
              log.error("cannot read the preload file {}: {}", file, e.toString());
              return;
            }
            log.info("preloading {} image references from {}", references.size(), file);
            PreloadJob job = submit(references, platforms, "file:" + file);
            log.info("preload job {} queued for {}", job.id(), file);
          });
    } catch (RejectedExecutionException e) {
      log.warn("not preloading {}: the service is shutting down", file);
    }
  }

  private void run(PreloadJob job) {
    job.markStarted();
    long start = System.nanoTime();
    log.info(
        "preload job {} ({}): {} references, platforms {}",
        job.id(),
        job.source(),
        job.items().size(),
        job.platforms().all() ? "all" : job.platforms().wanted());
    try {
      Flux.fromIterable(job.items())
          .flatMap(item -> preload(job, item), Math.max(1, settings.concurrency()))
          .blockLast();
    } catch (RuntimeException e) {
      // interrupted at shutdown: what is not done stays pending
      log.warn("preload job {} stopped: {}", job.id(), e.toString());
    } finally {
      job.markFinished();
    }
    log.info(
        "preload job {} finished in {} ms: {} done, {} failed",
        job.id(),
        TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - start),
        job.count(PreloadJob.ItemState.DONE),
        job.count(PreloadJob.ItemState.FAILED));
  }

  /** One image reference; never errors (a failure is recorded on the item). */
  private Mono<Void> preload(PreloadJob job, PreloadJob.Item item) {
    long start = System.nanoTime();
    return Mono.defer(
            () -> {
              item.running();
              PreloadReference ref = PreloadReference.parse(item.reference());
              RequestTarget target = RequestTarget.resolve(ref.rawName(), null, upstreams);
              target.upstream().requirePullThrough(target.name());
              return manifest(
                  target,
                  ref.reference(),
                  job.platforms(),
                  item,
                  ConcurrentHashMap.newKeySet(),
                  true);
            })
        .then(
            Mono.fromRunnable(
                () -> {
                  item.done();
                  imagesDone.increment();
                  log.info(
                      "preload {} done: {} manifests, {} blobs, {} bytes ({} fetched) in {} ms [job {}]",
                      item.reference(),
                      item.manifests(),
                      item.blobs(),
                      item.bytes(),
                      item.fetchedBytes(),
                      millisSince(start),
                      job.id());
                }))
        .onErrorResume(
            e -> {
              String why = reason(e);
              item.failed(why);
              imagesFailed.increment();
              log.warn(
                  "preload {} failed after {} bytes ({} fetched) in {} ms: {} [job {}]",
                  item.reference(),
                  item.bytes(),
                  item.fetchedBytes(),
                  millisSince(start),
                  why,
                  job.id());
              return Mono.empty();
            })
        .then();
  }

  /** A manifest, then its children (index) or its blobs (image), one after another. */
  private Mono<Void> manifest(
      RequestTarget target,
      Reference reference,
      PreloadPlatforms platforms,
      PreloadJob.Item item,
      Set<Digest> seen,
      boolean top) {
    return manifests
        .getForPreload(target.upstream(), target.name(), reference)
        .flatMapMany(
            result -> {
              StoredManifest m = result.manifest();
              if (top) {
                item.resolved(m.digest().toString());
              }
              if (!seen.add(m.digest())) {
                return Flux.empty();
              }
              boolean fetched = result.result() == CacheMetrics.Result.MISS;
              item.manifest(m.body().length, fetched);
              if (fetched) {
                fetchedBytes.increment(m.body().length);
              }
              ManifestContent content = ManifestContent.parse(m.body(), m.mediaType());
              if (content.isIndex()) {
                // Only platforms the policy allows too (the pull path would refuse the others);
                // the manifest service has read the index's platforms when it judged it.
                Rule rule = policy.ruleFor(target.upstream().key(), target.name().value());
                List<Descriptor> chosen =
                    content.references().stream()
                        .filter(d -> platforms.matches(d.platform()))
                        .filter(d -> rule == null || !policy.refuses(rule, d.digest()))
                        .toList();
                if (chosen.isEmpty() && (!platforms.all() || rule != null)) {
                  return Flux.error(
                      new IllegalStateException(
                          "the index has none of the platforms "
                              + (platforms.all() ? "" : platforms.wanted() + " ")
                              + (rule == null
                                  ? ""
                                  : "allowed by policy platforms=" + rule.platforms())
                              + "; it has "
                              + content.references().stream().map(Descriptor::platform).toList()));
                }
                return Flux.fromIterable(chosen)
                    .concatMap(
                        d ->
                            manifest(
                                target,
                                new Reference.ByDigest(d.digest()),
                                platforms,
                                item,
                                seen,
                                false))
                    .concatWith(referrersOf(target, m.digest(), item, seen));
              }
              return Flux.fromIterable(content.references())
                  .filter(d -> d.distributable() && seen.add(d.digest()))
                  .concatMap(d -> blob(target, d.digest(), item))
                  .concatWith(referrersOf(target, m.digest(), item, seen));
            })
        .then();
  }

  /**
   * With {@code preload.include-referrers}: every referrer of {@code subject} (signatures, SBOMs;
   * and theirs), manifest and blobs, whatever the platforms.
   */
  private Mono<Void> referrersOf(
      RequestTarget target, Digest subject, PreloadJob.Item item, Set<Digest> seen) {
    if (!settings.includeReferrers()) {
      return Mono.empty();
    }
    return referrers
        .list(target.upstream(), target.name(), subject)
        .flatMapMany(list -> Flux.fromIterable(list.descriptors()))
        .map(d -> Digest.parse(d.path("digest").asString("")))
        .concatMap(
            d ->
                manifest(
                    target, new Reference.ByDigest(d), PreloadPlatforms.ALL, item, seen, false))
        .then();
  }

  /**
   * A blob: a hit costs nothing; a miss starts (or joins) its download and waits until it is
   * stored.
   */
  private Mono<Void> blob(RequestTarget target, Digest digest, PreloadJob.Item item) {
    return blobs
        .get(target.upstream(), target.name(), digest)
        .flatMap(
            source -> {
              if (source instanceof BlobSource.Stored stored) {
                item.blob(stored.size(), false);
                return Mono.empty();
              }
              BlobSource.Downloading d = (BlobSource.Downloading) source;
              // Read the last byte (released once the blob is verified), then wait for it to be
              // stored; being a reader keeps the download from being stopped as an orphan
              // (blobs.orphan-download-timeout) however long it takes.
              Mono<Void> lastByte =
                  d.size() > 0
                      ? d.download()
                          .read(d.size() - 1, d.size() - 1)
                          .doOnNext(DataBufferUtils::release)
                          .then()
                      : Mono.empty();
              return lastByte
                  .then(d.stored())
                  .doOnNext(
                      size -> {
                        item.blob(size, true);
                        fetchedBytes.increment(size);
                      })
                  .then();
            });
  }

  private static String reason(Throwable e) {
    if (e instanceof OciException oci) {
      return oci.code() + ": " + oci.getMessage();
    }
    String message = e.getMessage();
    return message == null || message.isBlank() ? e.getClass().getSimpleName() : message;
  }

  private static long millisSince(long nanos) {
    return TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - nanos);
  }

  @Override
  public void destroy() {
    worker.shutdownNow();
  }
}
