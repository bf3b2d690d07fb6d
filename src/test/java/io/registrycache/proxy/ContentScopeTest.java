package io.registrycache.proxy;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import io.registrycache.config.ContentScope;
import io.registrycache.config.RegistryCacheProperties;
import io.registrycache.metrics.CacheMetrics;
import io.registrycache.oci.Digest;
import io.registrycache.oci.MediaTypes;
import io.registrycache.oci.OciErrorCode;
import io.registrycache.oci.OciException;
import io.registrycache.oci.Reference;
import io.registrycache.oci.RepositoryName;
import io.registrycache.storage.BlobStore;
import io.registrycache.storage.FileBlobStore;
import io.registrycache.storage.ManifestStore;
import io.registrycache.storage.StorageLayout;
import io.registrycache.upstream.ClientCredential;
import io.registrycache.upstream.Upstream;
import io.registrycache.upstream.UpstreamBlob;
import io.registrycache.upstream.UpstreamClient;
import io.registrycache.upstream.UpstreamException;
import io.registrycache.upstream.UpstreamManifest;
import io.registrycache.upstream.UpstreamManifestHead;
import io.registrycache.upstream.UpstreamTags;
import java.io.IOException;
import java.net.URI;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Clock;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;
import org.springframework.core.io.buffer.DefaultDataBufferFactory;
import org.springframework.http.HttpStatus;
import reactor.core.publisher.Flux;
import reactor.core.publisher.Mono;
import reactor.core.scheduler.Scheduler;
import reactor.core.scheduler.Schedulers;

/**
 * Issue 7.2: a blob and a manifest cached via upstream A / repository X are served under another
 * repository or upstream only as {@code storage.content-scope} allows; otherwise the upstream of
 * the request is asked first ({@code HEAD} for that repository) and refuses or confirms. The
 * upstream here is scripted: which (upstream, repository) pairs have the content, or down.
 */
class ContentScopeTest {

  @TempDir Path root;
  private RegistryCacheProperties properties;
  private final Upstream a = upstream("a");
  private final Upstream b = upstream("b");
  private final RepositoryName x = RepositoryName.parse("team/x");
  private final RepositoryName y = RepositoryName.parse("team/y");

  /** "upstream/repository" pairs the scripted upstream has the content in. */
  private final Set<String> upstreamHas = ConcurrentHashMap.newKeySet();

  private final List<String> heads = new ArrayList<>();
  private volatile boolean upstreamDown;
  private final Scheduler scheduler = Schedulers.newBoundedElastic(4, 100, "test-storage");
  private final byte[] blob = new byte[70_000];
  private final byte[] manifest;
  private BlobStore blobs;
  private ManifestStore manifests;
  private ProxyBlobService blobService;
  private ProxyManifestService manifestService;

  ContentScopeTest() {
    new Random(3).nextBytes(blob);
    manifest =
        ("{\"schemaVersion\":2,\"mediaType\":\""
                + MediaTypes.OCI_MANIFEST
                + "\",\"config\":{\"mediaType\":"
                + "\"application/vnd.oci.image.config.v1+json\",\"digest\":\""
                + Digest.sha256(blob)
                + "\",\"size\":"
                + blob.length
                + "},\"layers\":[]}")
            .getBytes(StandardCharsets.UTF_8);
  }

  private static Upstream upstream(String key) {
    return new Upstream(
        key,
        key + ".test",
        URI.create("http://127.0.0.1:9"),
        Set.of(),
        false,
        RegistryCacheProperties.upstream(Map.of()));
  }

  private void open(ContentScope scope, boolean offline) throws Exception {
    if (blobs != null) {
      blobs.close();
    }
    properties =
        RegistryCacheProperties.bind(
            Map.of(
                "registry-cache.storage.path", root.toString(),
                "registry-cache.storage.content-scope", scope,
                "registry-cache.offline", offline));
    StorageLayout layout = new StorageLayout(properties);
    blobs = new FileBlobStore(layout, Clock.systemUTC(), Duration.ZERO, scope);
    manifests = new ManifestStore(layout, blobs, properties, Clock.systemUTC());
    CacheMetrics metrics = new CacheMetrics(new SimpleMeterRegistry(), properties);
    blobService =
        new ProxyBlobService(
            PullThroughContext.single(upstreams, scheduler, metrics, properties, Clock.systemUTC()),
            blobs);
    manifestService =
        new ProxyManifestService(
            PullThroughContext.single(upstreams, scheduler, metrics, properties, Clock.systemUTC()),
            manifests);
  }

  @AfterEach
  void tearDown() {
    scheduler.dispose();
    if (blobs != null) {
      blobs.close();
    }
  }

  /** Fills the cache with the blob and the manifest through upstream A, repository X. */
  private void fillThroughAx() {
    upstreamHas.add("a/team/x");
    assertThat(pullBlob(a, x)).isEqualTo(blob);
    assertThat(pullManifest(a, x)).isEqualTo(manifest);
    heads.clear();
  }

  private byte[] pullBlob(Upstream u, RepositoryName n) {
    BlobSource source = blobService.get(u, n, Digest.sha256(blob)).block(Duration.ofSeconds(10));
    if (source instanceof BlobSource.Downloading d) {
      d.download().completion().block(Duration.ofSeconds(10));
      source = blobService.get(u, n, Digest.sha256(blob)).block(Duration.ofSeconds(10));
    }
    try {
      return Files.readAllBytes(((BlobSource.Stored) source).content().file().orElseThrow());
    } catch (IOException e) {
      throw new AssertionError(e);
    }
  }

  private byte[] pullManifest(Upstream u, RepositoryName n) {
    return manifestService
        .get(u, n, Reference.parse(Digest.sha256(manifest).toString()), List.of())
        .block(Duration.ofSeconds(10))
        .manifest()
        .body();
  }

  @ParameterizedTest
  @EnumSource(ContentScope.class)
  void contentOfAxUnderAnotherRepositoryOfAIsServedOnlyAsTheScopeAllows(ContentScope scope)
      throws Exception {
    open(scope, false);
    fillThroughAx();
    if (scope == ContentScope.REPOSITORY) {
      assertNotFound(() -> pullBlob(a, y));
      assertNotFound(() -> pullManifest(a, y));
      assertThat(heads).containsExactly("blob a/team/y", "manifest a/team/y");
    } else {
      assertThat(pullBlob(a, y)).isEqualTo(blob);
      assertThat(pullManifest(a, y)).isEqualTo(manifest);
      assertThat(heads).isEmpty();
    }
  }

  /**
   * Credential pass-through: a pass-through upstream's clients may see different repositories, so
   * its content is served per repository in every scope, a blob or manifest stored for X being
   * served in Y only after a {@code HEAD} there (with the asking client's credentials).
   */
  @ParameterizedTest
  @EnumSource(ContentScope.class)
  void aPassthroughUpstreamsContentIsServedPerRepositoryInEveryScope(ContentScope scope)
      throws Exception {
    open(scope, false);
    Upstream p =
        new Upstream(
            "p",
            "p.test",
            URI.create("http://127.0.0.1:9"),
            Set.of(),
            false,
            RegistryCacheProperties.upstream(Map.of("credentials", "passthrough")));
    Upstream alice = p.forClient(new ClientCredential("alice", "a"));
    Upstream bob = p.forClient(new ClientCredential("bob", "b"));
    upstreamHas.add("p/team/x");
    assertThat(pullBlob(alice, x)).isEqualTo(blob);
    assertThat(pullManifest(alice, x)).isEqualTo(manifest);
    heads.clear();
    assertNotFound(() -> pullBlob(bob, y));
    assertNotFound(() -> pullManifest(bob, y));
    assertThat(heads).containsExactly("blob p/team/y", "manifest p/team/y");
    heads.clear();
    upstreamHas.add("p/team/y");
    assertThat(pullBlob(bob, y)).isEqualTo(blob);
    assertThat(heads).containsExactly("blob p/team/y");
  }

  @ParameterizedTest
  @EnumSource(ContentScope.class)
  void contentOfAxUnderUpstreamBIsServedOnlyAsTheScopeAllows(ContentScope scope) throws Exception {
    open(scope, false);
    fillThroughAx();
    if (scope == ContentScope.SHARED) {
      assertThat(pullBlob(b, y)).isEqualTo(blob);
      assertThat(pullManifest(b, y)).isEqualTo(manifest);
      assertThat(heads).isEmpty();
    } else {
      assertNotFound(() -> pullBlob(b, y));
      assertNotFound(() -> pullManifest(b, y));
      assertNotFound(() -> pullBlob(b, x));
      assertThat(heads).containsExactly("blob b/team/y", "manifest b/team/y", "blob b/team/x");
    }
  }

  @ParameterizedTest
  @EnumSource(
      value = ContentScope.class,
      names = {"REPOSITORY", "UPSTREAM"})
  void contentTheUpstreamConfirmsIsLinkedAndServedFromTheCacheWithoutAnotherFetch(
      ContentScope scope) throws Exception {
    open(scope, false);
    fillThroughAx();
    upstreamHas.add("b/team/y");
    assertThat(pullBlob(b, y)).isEqualTo(blob);
    assertThat(pullManifest(b, y)).isEqualTo(manifest);
    assertThat(pullBlob(b, y)).isEqualTo(blob);
    assertThat(pullManifest(b, y)).isEqualTo(manifest);
    assertThat(heads)
        .as("one confirmation each, then linked")
        .containsExactly("blob b/team/y", "manifest b/team/y");
  }

  @Test
  void offlineContentNotLinkedForTheRequestIsNotFoundAndTheUpstreamIsNotAsked() throws Exception {
    open(ContentScope.REPOSITORY, false);
    fillThroughAx();
    open(ContentScope.REPOSITORY, true);
    upstreamHas.add("a/team/y");
    assertThat(pullBlob(a, x)).isEqualTo(blob);
    assertThat(pullManifest(a, x)).isEqualTo(manifest);
    assertNotFound(() -> pullBlob(a, y));
    assertNotFound(() -> pullManifest(a, y));
    assertThat(heads).isEmpty();
  }

  @Test
  void upstreamDownLeavesContentNotLinkedForTheRequestUnavailable() throws Exception {
    open(ContentScope.REPOSITORY, false);
    fillThroughAx();
    upstreamDown = true;
    assertThatThrownBy(() -> pullBlob(a, y))
        .isInstanceOfSatisfying(
            UpstreamException.class, e -> assertThat(e.isUnavailable()).isTrue());
    assertThatThrownBy(() -> pullManifest(a, y))
        .isInstanceOfSatisfying(
            UpstreamException.class, e -> assertThat(e.isUnavailable()).isTrue());
    assertThat(pullBlob(a, x)).as("where it was fetched for, no upstream needed").isEqualTo(blob);
  }

  @Test
  void linksSurviveARestartAndGoWithTheirContent() throws Exception {
    open(ContentScope.REPOSITORY, false);
    fillThroughAx();
    open(ContentScope.REPOSITORY, false); // a restart: stores rebuilt from disk
    upstreamDown = true;
    assertThat(pullBlob(a, x)).isEqualTo(blob);
    assertThat(pullManifest(a, x)).isEqualTo(manifest);
    assertThat(heads).isEmpty();
    Digest blobDigest = Digest.sha256(blob);
    Digest manifestDigest = Digest.sha256(manifest);
    StorageLayout layout = new StorageLayout(properties);
    assertThat(Files.readAllLines(layout.linksRoot().resolve("blobs.journal")))
        .contains("+ " + blobDigest + " a/team/x");
    assertThat(Files.readAllLines(layout.linksRoot().resolve("manifests.journal")))
        .contains("+ " + manifestDigest + " a/team/x");

    blobs.delete(blobDigest);
    manifests.delete(manifestDigest);
    assertThat(Files.readAllLines(layout.linksRoot().resolve("blobs.journal")))
        .endsWith("- " + blobDigest);
    assertThat(Files.readAllLines(layout.linksRoot().resolve("manifests.journal")))
        .endsWith("- " + manifestDigest);
    assertThat(blobs.links().linksOf(blobDigest)).isEmpty();
    assertThat(manifests.links().linksOf(manifestDigest)).isEmpty();
  }

  @Test
  void linksOfContentGoneFromDiskWhileStoppedAreDroppedAtStartUp() throws Exception {
    open(ContentScope.REPOSITORY, false);
    fillThroughAx();
    blobs.close();
    StorageLayout layout = new StorageLayout(properties);
    Digest blobDigest = Digest.sha256(blob);
    Files.delete(layout.blob(blobDigest));
    open(ContentScope.REPOSITORY, false);
    assertThat(
            Files.readAllLines(layout.linksRoot().resolve("blobs.journal")).stream()
                .filter(line -> line.contains(blobDigest.toString())))
        .as("its last line in the journal removes it")
        .last()
        .isEqualTo("- " + blobDigest);
    assertThat(blobs.links().linksOf(blobDigest)).isEmpty();
    assertThat(manifests.links().linksOf(Digest.sha256(manifest))).containsExactly("a/team/x");
  }

  private static void assertNotFound(Runnable pull) {
    assertThatThrownBy(pull::run)
        .isInstanceOfSatisfying(
            OciException.class,
            e -> {
              assertThat(e.status()).isEqualTo(HttpStatus.NOT_FOUND);
              assertThat(e.code()).isIn(OciErrorCode.BLOB_UNKNOWN, OciErrorCode.MANIFEST_UNKNOWN);
            });
  }

  private Mono<Void> check(String what, Upstream u, RepositoryName n, OciErrorCode unknown) {
    synchronized (heads) {
      heads.add(what + " " + u.key() + "/" + n);
    }
    if (upstreamDown) {
      return Mono.error(
          new UpstreamException(
              u.key(),
              OciErrorCode.UPSTREAM_UNAVAILABLE,
              HttpStatus.SERVICE_UNAVAILABLE,
              "scripted: down",
              null,
              null));
    }
    if (!upstreamHas.contains(u.key() + "/" + n)) {
      return Mono.error(
          new UpstreamException(
              u.key(), unknown, HttpStatus.NOT_FOUND, "scripted: not here", null, null));
    }
    return Mono.empty();
  }

  private final UpstreamClient upstreams =
      new UpstreamClient() {
        @Override
        public Mono<UpstreamManifest> getManifest(
            Upstream u, RepositoryName n, Reference reference, List<String> accept, int maxBytes) {
          return Mono.just(new UpstreamManifest(manifest, MediaTypes.OCI_MANIFEST, null));
        }

        @Override
        public Mono<UpstreamManifestHead> headManifest(
            Upstream u, RepositoryName n, Reference reference, List<String> accept) {
          return check("manifest", u, n, OciErrorCode.MANIFEST_UNKNOWN)
              .then(
                  Mono.just(
                      new UpstreamManifestHead(
                          Digest.sha256(manifest), MediaTypes.OCI_MANIFEST, manifest.length)));
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
          return check("blob", u, n, OciErrorCode.BLOB_UNKNOWN).then(Mono.just((long) blob.length));
        }

        @Override
        public Mono<UpstreamTags> listTags(
            Upstream u, RepositoryName n, Integer size, String last) {
          return Mono.error(new AssertionError("no tag list expected"));
        }
      };
}
