package io.registrycache.startup;

import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import io.registrycache.config.RegistryCacheProperties;
import io.registrycache.metrics.CacheMetrics;
import io.registrycache.oci.Digest;
import io.registrycache.oci.Reference;
import io.registrycache.oci.RepositoryName;
import io.registrycache.proxy.ProxyBlobService;
import io.registrycache.proxy.ProxyManifestService;
import io.registrycache.proxy.PullThroughContext;
import io.registrycache.storage.FileBlobStore;
import io.registrycache.storage.ManifestStore;
import io.registrycache.storage.StorageLayout;
import io.registrycache.upstream.ReactorNettyUpstreamClient;
import io.registrycache.upstream.Upstream;
import io.registrycache.upstream.UpstreamResilience;
import java.io.IOException;
import java.net.URI;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Clock;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.atomic.AtomicInteger;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import org.springframework.context.SmartLifecycle;
import org.springframework.core.io.buffer.DataBufferUtils;
import org.springframework.core.io.buffer.DefaultDataBufferFactory;
import org.springframework.stereotype.Component;
import org.springframework.util.FileSystemUtils;
import reactor.core.publisher.Flux;
import reactor.core.publisher.Mono;
import reactor.core.scheduler.Scheduler;
import reactor.core.scheduler.Schedulers;

/**
 * Runs the pull-through path before the pull port opens, so that the first clients' pulls do not
 * pay for a just-started JVM: measured with the shared benchmark at 50 ms from the upstream, the
 * first ten cold pulls after a start took 650-970 ms against 280 ms a few seconds later, their code
 * still interpreted and its classes loaded on first use (docs/performance.md, issue 28).
 *
 * <p>{@code registry-cache.admin.warm-up-pulls} small images (a config and two layers, every blob
 * different) are pulled cold and then warm, {@value #CONCURRENCY} at a time, from a synthetic
 * upstream on loopback ({@link TrainingUpstream}) through the same classes a client's pull runs
 * (upstream client, single-flight, download, store writer, manifest parse) — but through instances
 * of their own: their own upstream client and meter registry, and a throw-away file-system store
 * under {@code <storage.path>/tmp/}, removed afterwards. So nothing of the warm-up is in the cache,
 * its metrics or its upstreams' connection pools, and no request leaves the machine. It holds the
 * start back for at most {@link #TIME_LIMIT}; a failure is logged and the start goes on.
 */
@Component
public class StartupWarmUp implements SmartLifecycle {

  private static final Logger log = LoggerFactory.getLogger(StartupWarmUp.class);

  /** Longest the warm-up holds the start back. */
  static final Duration TIME_LIMIT = Duration.ofSeconds(20);

  /** Images pulled at once, as a few clients would. */
  static final int CONCURRENCY = 4;

  /** Layer sizes of each synthetic image, bytes: one under a read buffer, one over several. */
  private static final int[] LAYER_BYTES = {2 << 10, 160 << 10};

  private final int pulls;
  private final Path storageRoot;
  private volatile boolean running;

  /**
   * @param properties {@code admin.warm-up-pulls} and {@code storage.path} (its {@code tmp/} holds
   *     the throw-away store)
   */
  public StartupWarmUp(RegistryCacheProperties properties) {
    this.pulls = properties.admin().warmUpPulls();
    this.storageRoot = properties.storage().path();
  }

  @Override
  public void start() {
    running = true;
    if (pulls > 0) {
      run(pulls);
    }
  }

  @Override
  public void stop() {
    running = false;
  }

  @Override
  public boolean isRunning() {
    return running;
  }

  /**
   * Before the web server (Spring Boot's {@code DEFAULT_PHASE - 2048}) opens the pull port; after
   * the peer port ({@code peer.PeerServer}, {@code DEFAULT_PHASE - 3584}) has opened, so the other
   * replicas can reach this one meanwhile.
   */
  @Override
  public int getPhase() {
    return SmartLifecycle.DEFAULT_PHASE - 3072;
  }

  /**
   * Pulls {@code images} synthetic images cold, then warm. Blocking; never throws.
   *
   * @return the images pulled both ways (fewer when {@link #TIME_LIMIT} ran out or a pull failed)
   */
  int run(int images) {
    long started = System.nanoTime();
    AtomicInteger done = new AtomicInteger();
    Path root = null;
    SimpleMeterRegistry meters = new SimpleMeterRegistry();
    Scheduler storage =
        Schedulers.newBoundedElastic(CONCURRENCY, 1024, "warm-up-storage", 60, true);
    ReactorNettyUpstreamClient client =
        new ReactorNettyUpstreamClient(null, meters, new UpstreamResilience(null, meters));
    try {
      Files.createDirectories(storageRoot.resolve("tmp"));
      root = Files.createTempDirectory(storageRoot.resolve("tmp"), "warm-up-");
      RegistryCacheProperties settings =
          RegistryCacheProperties.bind(Map.of("registry-cache.storage.path", root.toString()));
      StorageLayout layout = new StorageLayout(settings);
      try (TrainingUpstream upstream = TrainingUpstream.start(0, images, LAYER_BYTES);
          FileBlobStore blobs = new FileBlobStore(layout)) {
        PullThroughContext context =
            PullThroughContext.single(
                client, storage, new CacheMetrics(meters, settings), settings, Clock.systemUTC());
        ProxyManifestService manifests =
            new ProxyManifestService(
                context, new ManifestStore(layout, blobs, settings, Clock.systemUTC()));
        ProxyBlobService blobService = new ProxyBlobService(context, blobs);
        String url = "http://127.0.0.1:" + upstream.port();
        Upstream synthetic =
            new Upstream(
                "warm-up",
                "127.0.0.1:" + upstream.port(),
                URI.create(url),
                Set.of(),
                false,
                RegistryCacheProperties.upstream(Map.of("url", url)));
        RepositoryName name = RepositoryName.parse(TrainingUpstream.REPOSITORY);
        Flux.range(0, images)
            .flatMap(
                i ->
                    pull(manifests, blobService, synthetic, name, i, upstream.blobDigests(i))
                        .then(
                            pull(
                                manifests,
                                blobService,
                                synthetic,
                                name,
                                i,
                                upstream.blobDigests(i)))
                        .doOnSuccess(v -> done.incrementAndGet()),
                CONCURRENCY)
            .take(TIME_LIMIT)
            .blockLast(TIME_LIMIT.plusSeconds(5));
      }
      log.info(
          "start-up warm-up: {} of {} synthetic images pulled cold and warm in {} ms (registry-cache.admin.warm-up-pulls)",
          done.get(),
          images,
          Duration.ofNanos(System.nanoTime() - started).toMillis());
    } catch (IOException | RuntimeException e) {
      log.warn("start-up warm-up stopped after {} images: {}", done.get(), e.toString());
    } finally {
      client.destroy();
      storage.dispose();
      if (root != null) {
        try {
          FileSystemUtils.deleteRecursively(root);
        } catch (IOException e) {
          log.warn("start-up warm-up: could not remove {}: {}", root, e.toString());
        }
      }
    }
    return done.get();
  }

  /** One pull as a client makes it: the manifest by tag, then each blob's whole body. */
  private static Mono<Void> pull(
      ProxyManifestService manifests,
      ProxyBlobService blobs,
      Upstream upstream,
      RepositoryName name,
      int image,
      List<String> digests) {
    return manifests
        .get(upstream, name, new Reference.Tag(TrainingUpstream.tag(image)), List.of())
        .thenMany(
            Flux.fromIterable(digests)
                .concatMap(
                    d ->
                        blobs
                            .get(upstream, name, Digest.parse(d))
                            .flatMapMany(
                                source ->
                                    source.read(0, -1, DefaultDataBufferFactory.sharedInstance))
                            .doOnNext(DataBufferUtils::release)))
        .then();
  }
}
