package io.registrycache.proxy;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import io.registrycache.config.RegistryCacheProperties;
import io.registrycache.metrics.CacheMetrics;
import io.registrycache.oci.Digest;
import io.registrycache.oci.Reference;
import io.registrycache.oci.RepositoryName;
import io.registrycache.storage.ContentWriter;
import io.registrycache.storage.FileBlobStore;
import io.registrycache.storage.StorageLayout;
import io.registrycache.upstream.Upstream;
import io.registrycache.upstream.UpstreamBlob;
import io.registrycache.upstream.UpstreamClient;
import io.registrycache.upstream.UpstreamManifest;
import io.registrycache.upstream.UpstreamManifestHead;
import io.registrycache.upstream.UpstreamTags;
import java.io.IOException;
import java.lang.reflect.InvocationHandler;
import java.lang.reflect.InvocationTargetException;
import java.lang.reflect.Method;
import java.lang.reflect.Proxy;
import java.net.URI;
import java.nio.file.Path;
import java.time.Clock;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.Set;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.springframework.core.io.buffer.DefaultDataBufferFactory;
import reactor.core.publisher.Flux;
import reactor.core.publisher.Mono;
import reactor.core.scheduler.Scheduler;
import reactor.core.scheduler.Schedulers;

/**
 * A client that asks for a prefetched blob in the moment between its rename into the store (it is
 * served from there) and the end of its prefetch fill counts as a prefetch hit and a miss — it was
 * fetched for this pull — not as a plain hit. Seen in a CI run: {@code AdminEndpointIT} counted the
 * re-pulled config of an evicted image as a hit. The store's commit is held open after the rename
 * to make that moment last.
 */
class PrefetchAccountingTest {

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
  private final byte[] blob = new byte[4096];
  private final CountDownLatch commitHeld = new CountDownLatch(1);
  private final CountDownLatch releaseCommit = new CountDownLatch(1);
  private final SimpleMeterRegistry meters = new SimpleMeterRegistry();
  private Scheduler scheduler;
  private FileBlobStore files;
  private ProxyBlobService service;

  @BeforeEach
  void setUp() throws Exception {
    new Random(11).nextBytes(blob);
    RegistryCacheProperties properties =
        RegistryCacheProperties.bind(Map.of("registry-cache.storage.path", root.toString()));
    files = heldCommits(new StorageLayout(properties));
    scheduler = Schedulers.newBoundedElastic(4, 100, "test-storage");
    service =
        new ProxyBlobService(
            PullThroughContext.single(
                upstreams,
                scheduler,
                new CacheMetrics(meters, properties),
                properties,
                Clock.systemUTC()),
            files);
  }

  @AfterEach
  void tearDown() {
    releaseCommit.countDown();
    scheduler.dispose();
    files.close();
  }

  @Test
  void aClientBetweenTheRenameAndTheEndOfAPrefetchIsAPrefetchHitAndAMiss() throws Exception {
    Digest digest = Digest.sha256(blob);
    service.prefetch(upstream, name, digest).subscribe(null, e -> {});
    assertThat(commitHeld.await(10, TimeUnit.SECONDS))
        .as("the prefetch's commit renamed the blob")
        .isTrue();
    assertThat(files.size(digest))
        .as("visible in the store while the fill is still finishing")
        .contains((long) blob.length);

    BlobSource first = service.get(upstream, name, digest).block(Duration.ofSeconds(10));
    assertThat(first).isInstanceOf(BlobSource.Stored.class);
    assertThat(((BlobSource.Stored) first).fetched())
        .as("fetched for this pull by the prefetch: a miss")
        .isTrue();
    assertThat(prefetchHits()).isEqualTo(1.0);

    releaseCommit.countDown();
    await().atMost(Duration.ofSeconds(10)).until(() -> service.downloadsInFlight() == 0);
    BlobSource second = service.get(upstream, name, digest).block(Duration.ofSeconds(10));
    assertThat(((BlobSource.Stored) second).fetched())
        .as("asked for before: now a plain hit")
        .isFalse();
    assertThat(prefetchHits()).as("counted once").isEqualTo(1.0);
  }

  private double prefetchHits() {
    var counter = meters.find("registry.cache.prefetch.hits").counter();
    return counter == null ? 0 : counter.count();
  }

  /**
   * A store whose writers' {@code commit} returns only when the test lets it (after the rename).
   */
  private FileBlobStore heldCommits(StorageLayout layout) {
    return new FileBlobStore(layout) {
      @Override
      public ContentWriter newWriter(
          Digest digest, boolean behindOwner, String upstreamKey, String repository)
          throws IOException {
        return proxy(
            ContentWriter.class,
            super.newWriter(digest, behindOwner, upstreamKey, repository),
            (m, a, r) -> {
              if (m.getName().equals("commit")) {
                commitHeld.countDown();
                releaseCommit.await(10, TimeUnit.SECONDS);
              }
              return r;
            });
      }
    };
  }

  /** What a call's result becomes, after the real call returned it. */
  private interface After {
    Object apply(Method method, Object[] args, Object result) throws Exception;
  }

  @SuppressWarnings("unchecked")
  private static <T> T proxy(Class<T> type, Object target, After after) {
    InvocationHandler handler =
        (p, method, args) -> {
          Object result;
          try {
            result = method.invoke(target, args);
          } catch (InvocationTargetException e) {
            throw e.getCause();
          }
          return after.apply(method, args, result);
        };
    return (T) Proxy.newProxyInstance(type.getClassLoader(), new Class<?>[] {type}, handler);
  }

  private final UpstreamClient upstreams =
      new UpstreamClient() {
        @Override
        public Mono<UpstreamManifest> getManifest(
            Upstream u, RepositoryName n, Reference reference, List<String> accept, int maxBytes) {
          return Mono.error(new AssertionError("no manifest expected"));
        }

        @Override
        public Mono<UpstreamManifestHead> headManifest(
            Upstream u, RepositoryName n, Reference reference, List<String> accept) {
          return Mono.error(new AssertionError("no HEAD expected"));
        }

        @Override
        public Mono<UpstreamBlob> getBlob(Upstream u, RepositoryName n, Digest digest) {
          return Mono.just(
              new UpstreamBlob(
                  blob.length,
                  Flux.just(DefaultDataBufferFactory.sharedInstance.wrap(blob.clone()))));
        }

        @Override
        public Mono<Long> headBlob(Upstream u, RepositoryName n, Digest digest) {
          return Mono.error(new AssertionError("no HEAD expected"));
        }

        @Override
        public Mono<UpstreamTags> listTags(
            Upstream u, RepositoryName n, Integer size, String last) {
          return Mono.error(new AssertionError("no tag list expected"));
        }
      };
}
