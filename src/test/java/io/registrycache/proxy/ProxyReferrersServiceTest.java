package io.registrycache.proxy;

import static org.assertj.core.api.Assertions.assertThat;

import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import io.registrycache.config.RegistryCacheProperties;
import io.registrycache.metrics.CacheMetrics;
import io.registrycache.metrics.CacheMetrics.Result;
import io.registrycache.oci.Digest;
import io.registrycache.oci.OciErrorCode;
import io.registrycache.oci.Reference;
import io.registrycache.oci.RepositoryName;
import io.registrycache.storage.BlobStore;
import io.registrycache.storage.FileBlobStore;
import io.registrycache.storage.ManifestStore;
import io.registrycache.storage.ReferrersStore;
import io.registrycache.storage.StorageLayout;
import io.registrycache.upstream.Upstream;
import io.registrycache.upstream.UpstreamBlob;
import io.registrycache.upstream.UpstreamClient;
import io.registrycache.upstream.UpstreamException;
import io.registrycache.upstream.UpstreamManifest;
import io.registrycache.upstream.UpstreamManifestHead;
import io.registrycache.upstream.UpstreamReferrers;
import io.registrycache.upstream.UpstreamTags;
import java.net.URI;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.time.Clock;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.CopyOnWriteArrayList;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.springframework.http.HttpStatus;
import reactor.core.publisher.Mono;
import reactor.core.scheduler.Scheduler;
import reactor.core.scheduler.Schedulers;

/**
 * The service against an upstream whose referrers API pages (two pages): all pages are joined and
 * stored; with the TTL over and the upstream failing, the stored list is served stale.
 */
class ProxyReferrersServiceTest {

  @TempDir Path root;
  private final Scheduler scheduler = Schedulers.newBoundedElastic(4, 100, "test-storage");
  private final Upstream upstream =
      new Upstream(
          "api",
          "api.test",
          URI.create("http://127.0.0.1:9"),
          Set.of(),
          false,
          RegistryCacheProperties.upstream(Map.of()));
  private final RepositoryName name = RepositoryName.parse("team/app");
  private final Digest subject = Digest.sha256("subject".getBytes(StandardCharsets.UTF_8));
  private final List<URI> asked = new CopyOnWriteArrayList<>();
  private volatile boolean down;

  @AfterEach
  void tearDown() {
    scheduler.dispose();
  }

  private static byte[] index(String digest) {
    return ("{\"schemaVersion\":2,\"mediaType\":\"application/vnd.oci.image.index.v1+json\",\"manifests\":[{\"digest\":\""
            + digest
            + "\",\"artifactType\":\"sig\"}]}")
        .getBytes(StandardCharsets.UTF_8);
  }

  private ProxyReferrersService service(Duration ttl) throws Exception {
    RegistryCacheProperties properties =
        RegistryCacheProperties.bind(
            Map.of(
                "registry-cache.storage.path",
                root.toString(),
                "registry-cache.referrers.ttl",
                ttl));
    StorageLayout layout = new StorageLayout(properties);
    BlobStore blobs = new FileBlobStore(layout);
    ManifestStore manifests = new ManifestStore(layout, blobs, properties, Clock.systemUTC());
    CacheMetrics metrics = new CacheMetrics(new SimpleMeterRegistry(), properties);
    URI second = URI.create("http://127.0.0.1:9/v2/team/app/referrers/" + subject + "?page=2");
    UpstreamClient client =
        new UpstreamClient() {
          @Override
          public Mono<UpstreamManifest> getManifest(
              Upstream u, RepositoryName n, Reference r, List<String> a, int max) {
            return Mono.error(
                new AssertionError("the tag schema is not used when the API answers"));
          }

          @Override
          public Mono<UpstreamManifestHead> headManifest(
              Upstream u, RepositoryName n, Reference r, List<String> a) {
            return Mono.error(new AssertionError());
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

          @Override
          public Mono<UpstreamReferrers> listReferrers(
              Upstream u, RepositoryName n, Digest s, URI page) {
            asked.add(page == null ? URI.create("first") : page);
            if (down) {
              return Mono.error(
                  new UpstreamException(
                      u.key(),
                      OciErrorCode.UPSTREAM_UNAVAILABLE,
                      HttpStatus.SERVICE_UNAVAILABLE,
                      "down",
                      null,
                      null));
            }
            return Mono.just(
                page == null
                    ? new UpstreamReferrers(index("sha256:a"), second)
                    : new UpstreamReferrers(index("sha256:b"), null));
          }
        };
    PullThroughContext context =
        PullThroughContext.single(client, scheduler, metrics, properties, Clock.systemUTC());
    return new ProxyReferrersService(
        context, new ProxyManifestService(context, manifests), new ReferrersStore(layout));
  }

  private static List<String> digests(ProxyReferrersService.Referrers referrers) {
    return referrers.descriptors().stream().map(d -> d.path("digest").asString()).toList();
  }

  @Test
  void joinsEveryUpstreamPageCachesForTheTtlAndServesStaleWhenTheUpstreamFails() throws Exception {
    ProxyReferrersService cached = service(Duration.ofHours(1));
    ProxyReferrersService.Referrers cold =
        cached.list(upstream, name, subject).block(Duration.ofSeconds(10));
    assertThat(digests(cold)).containsExactly("sha256:a", "sha256:b");
    assertThat(cold.result()).isEqualTo(Result.MISS);
    assertThat(asked).hasSize(2);
    ProxyReferrersService.Referrers warm =
        cached.list(upstream, name, subject).block(Duration.ofSeconds(10));
    assertThat(warm.result()).isEqualTo(Result.HIT);
    assertThat(asked).hasSize(2);

    down = true;
    ProxyReferrersService expired = service(Duration.ZERO);
    ProxyReferrersService.Referrers stale =
        expired.list(upstream, name, subject).block(Duration.ofSeconds(10));
    assertThat(stale.result()).isEqualTo(Result.STALE);
    assertThat(digests(stale)).containsExactly("sha256:a", "sha256:b");
    assertThat(asked).hasSize(3);
  }
}
