package io.registrycache.proxy;

import static org.assertj.core.api.Assertions.assertThat;

import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import io.registrycache.config.RegistryCacheProperties;
import io.registrycache.metrics.CacheMetrics;
import io.registrycache.metrics.CacheMetrics.Result;
import io.registrycache.oci.Digest;
import io.registrycache.oci.MediaTypes;
import io.registrycache.oci.Reference;
import io.registrycache.oci.RepositoryName;
import io.registrycache.storage.BlobStore;
import io.registrycache.storage.FileBlobStore;
import io.registrycache.storage.ManifestStore;
import io.registrycache.storage.StorageLayout;
import io.registrycache.upstream.Upstream;
import io.registrycache.upstream.UpstreamBlob;
import io.registrycache.upstream.UpstreamClient;
import io.registrycache.upstream.UpstreamManifest;
import io.registrycache.upstream.UpstreamManifestHead;
import io.registrycache.upstream.UpstreamTags;
import java.net.URI;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.time.Clock;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import reactor.core.Disposable;
import reactor.core.publisher.Mono;
import reactor.core.scheduler.Scheduler;
import reactor.core.scheduler.Schedulers;

/**
 * Issue 10: a warm tag (its link and its manifest in memory) is answered without a hop to the
 * storage scheduler; after a restart (nothing in memory) the first lookup reads the disk there.
 */
class WarmTagTest {

  @TempDir Path root;
  private final Upstream upstream =
      new Upstream(
          "local",
          "local.test",
          URI.create("http://127.0.0.1:9"),
          Set.of(),
          false,
          RegistryCacheProperties.upstream(Map.of()));
  private final RepositoryName name = RepositoryName.parse("team/app");
  private final Reference tag = Reference.parse("v1");
  private final byte[] manifest =
      ("{\"schemaVersion\":2,\"mediaType\":\""
              + MediaTypes.OCI_MANIFEST
              + "\",\"config\":{\"mediaType\":"
              + "\"application/vnd.oci.image.config.v1+json\",\"digest\":\""
              + Digest.sha256(new byte[1])
              + "\",\"size\":1},"
              + "\"layers\":[]}")
          .getBytes(StandardCharsets.UTF_8);
  private final AtomicInteger manifestGets = new AtomicInteger();
  private final CountingScheduler storage = new CountingScheduler();
  private BlobStore blobs;

  /** Counts every use: a task or a worker (what subscribeOn/publishOn take). */
  static final class CountingScheduler implements Scheduler {
    final Scheduler delegate = Schedulers.newBoundedElastic(4, 100, "counted-storage");
    final AtomicInteger uses = new AtomicInteger();

    @Override
    public Disposable schedule(Runnable task) {
      uses.incrementAndGet();
      return delegate.schedule(task);
    }

    @Override
    public Worker createWorker() {
      uses.incrementAndGet();
      return delegate.createWorker();
    }

    @Override
    public void dispose() {
      delegate.dispose();
    }
  }

  private final UpstreamClient upstreams =
      new UpstreamClient() {
        @Override
        public Mono<UpstreamManifest> getManifest(
            Upstream u, RepositoryName n, Reference r, List<String> a, int max) {
          manifestGets.incrementAndGet();
          return Mono.just(new UpstreamManifest(manifest, MediaTypes.OCI_MANIFEST, null));
        }

        @Override
        public Mono<UpstreamManifestHead> headManifest(
            Upstream u, RepositoryName n, Reference r, List<String> a) {
          return Mono.error(new AssertionError("no HEAD expected within the tag TTL"));
        }

        @Override
        public Mono<UpstreamBlob> getBlob(Upstream u, RepositoryName n, Digest d) {
          return Mono.error(new AssertionError());
        }

        @Override
        public Mono<Long> headBlob(Upstream u, RepositoryName n, Digest d) {
          return Mono.error(new AssertionError());
        }

        @Override
        public Mono<UpstreamTags> listTags(
            Upstream u, RepositoryName n, Integer size, String last) {
          return Mono.error(new AssertionError());
        }
      };

  private ProxyManifestService service() throws Exception {
    RegistryCacheProperties properties =
        RegistryCacheProperties.bind(Map.of("registry-cache.storage.path", root.toString()));
    StorageLayout layout = new StorageLayout(properties);
    if (blobs != null) {
      blobs.close();
    }
    blobs = new FileBlobStore(layout);
    ManifestStore manifests = new ManifestStore(layout, blobs, properties, Clock.systemUTC());
    return new ProxyManifestService(
        PullThroughContext.single(
            upstreams,
            storage,
            new CacheMetrics(new SimpleMeterRegistry(), properties),
            properties,
            Clock.systemUTC()),
        manifests);
  }

  @AfterEach
  void tearDown() {
    storage.dispose();
    if (blobs != null) {
      blobs.close();
    }
  }

  @Test
  void aWarmTagIsServedWithoutTheStorageScheduler() throws Exception {
    ProxyManifestService service = service();
    ManifestResult cold = service.get(upstream, name, tag, List.of()).block(Duration.ofSeconds(10));
    assertThat(cold.result()).isEqualTo(Result.MISS);
    assertThat(storage.uses.get()).isPositive();

    storage.uses.set(0);
    ManifestResult warm = service.get(upstream, name, tag, List.of()).block(Duration.ofSeconds(10));

    assertThat(warm.result()).isEqualTo(Result.HIT);
    assertThat(warm.manifest().body()).isEqualTo(manifest);
    assertThat(storage.uses.get()).isZero();
    assertThat(manifestGets.get()).isEqualTo(1);
  }

  @Test
  void afterARestartTheFirstLookupReadsTheDiskOnTheStorageScheduler() throws Exception {
    service().get(upstream, name, tag, List.of()).block(Duration.ofSeconds(10));
    ProxyManifestService restarted = service();
    storage.uses.set(0);

    ManifestResult first =
        restarted.get(upstream, name, tag, List.of()).block(Duration.ofSeconds(10));
    int firstUses = storage.uses.getAndSet(0);
    ManifestResult second =
        restarted.get(upstream, name, tag, List.of()).block(Duration.ofSeconds(10));

    assertThat(first.result()).isEqualTo(Result.HIT);
    assertThat(first.manifest().body()).isEqualTo(manifest);
    assertThat(firstUses).isPositive();
    assertThat(second.result()).isEqualTo(Result.HIT);
    assertThat(storage.uses.get()).isZero();
    assertThat(manifestGets.get()).isEqualTo(1);
  }
}
