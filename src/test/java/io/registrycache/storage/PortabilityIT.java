package io.registrycache.storage;

import static io.registrycache.testsupport.CacheClient.describe;
import static org.assertj.core.api.Assertions.assertThat;

import io.registrycache.testsupport.CacheClient;
import io.registrycache.testsupport.CacheProperties;
import io.registrycache.testsupport.ManualCache;
import io.registrycache.testsupport.Sha256;
import io.registrycache.testsupport.TestImages;
import io.registrycache.testsupport.TestImages.Blob;
import io.registrycache.testsupport.TestImages.Image;
import io.registrycache.testsupport.TestImages.ImageIndex;
import io.registrycache.testsupport.TestImages.PlatformImage;
import io.registrycache.testsupport.UpstreamRegistryContainer;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.net.ServerSocket;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collections;
import java.util.List;
import java.util.stream.Stream;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * The cache folder is portable: what one instance pulled is served byte for byte by another
 * instance started on a copy of the folder at another path (another machine, in spirit), with a
 * different upstream URL that does not answer and the original upstream stopped. Nothing in the
 * folder depends on its path or on the upstream's address; tag links are kept per upstream
 * <em>key</em>, which is what must stay the same.
 */
class PortabilityIT {

  static final UpstreamRegistryContainer upstream = new UpstreamRegistryContainer();

  @TempDir static Path machineA;
  @TempDir static Path machineB;

  static Image image;
  static Image docker;
  static ImageIndex index;

  @BeforeAll
  static void seed() {
    upstream.start();
    image = upstream.pusher().push(TestImages.smallOci(TestImages.uniqueRepository("move"), "v1"));
    docker =
        upstream
            .pusher()
            .push(TestImages.dockerSchema2(TestImages.uniqueRepository("move-docker"), "v2"));
    index =
        upstream.pusher().push(TestImages.index(TestImages.uniqueRepository("move-idx"), "multi"));
  }

  @AfterAll
  static void stopUpstream() {
    upstream.stop();
  }

  static ManualCache startCache(Path storage, String upstreamUrl) {
    return ManualCache.start(
        CacheProperties.cache(storage)
            .localUpstream(() -> upstreamUrl)
            .upstream("connect-timeout", "1s")
            .upstream("read-timeout", "2s")
            .set("registry-cache.manifests.tag-ttl", "1h")
            .set("registry-cache.access-log.enabled", "true"));
  }

  @Test
  void aCopiedCacheFolderServesEverythingByteExactWithoutItsUpstream() throws IOException {
    Path original = machineA.resolve("cache");
    try (ManualCache a = startCache(original, upstream.baseUrl())) {
      pullEverything(a.client().withTimeout(Duration.ofSeconds(20)));
    }

    // "Move" the folder: copy it elsewhere (as cp -a / rsync -a / tar would), then remove the
    // original.
    Path moved = machineB.resolve("elsewhere").resolve("registry-cache");
    copyTree(original, moved);
    deleteTree(original);
    upstream.stopUpstream();

    // Another upstream URL, nothing listens there: every answer below comes from the folder.
    String nowhere = "http://127.0.0.1:" + unusedPort();
    try (ManualCache b = startCache(moved, nowhere)) {
      CacheClient cache = b.client().withTimeout(Duration.ofSeconds(20));
      pullEverything(cache);
      // The in-path and containerd forms find the same entries (same upstream key).
      CacheClient.assertManifest(
          cache.getManifest("/v2/upstream.test/" + image.repository() + "/manifests/v1"),
          image.manifest());
      CacheClient.assertManifest(
          cache.getManifest("/v2/" + index.repository() + "/manifests/multi?ns=upstream.test"),
          index.index());
      // Cached tags are listed; something never pulled is an upstream error naming the new URL.
      HttpResponse<byte[]> tags = cache.get("/v2/" + image.repository() + "/tags/list");
      assertThat(tags.statusCode()).as(describe(tags)).isEqualTo(200);
      assertThat(new String(tags.body(), StandardCharsets.UTF_8)).contains("\"v1\"");
      HttpResponse<byte[]> missing =
          cache.get("/v2/" + image.repository() + "/blobs/" + TestImages.unknownDigest());
      assertThat(missing.statusCode()).as(describe(missing)).isIn(502, 503, 504);
      // The admin API sees the moved images as complete.
      HttpResponse<byte[]> images =
          CacheClient.onPort(managementPort(b)).get("/actuator/cache/images?filter=move");
      assertThat(images.statusCode()).as(describe(images)).isEqualTo(200);
      String listing = new String(images.body(), StandardCharsets.UTF_8);
      assertThat(listing)
          .contains(image.manifest().digest(), docker.manifest().digest(), index.index().digest());
      assertThat(listing).doesNotContain("\"complete\":false");
    }
  }

  static void pullEverything(CacheClient cache) {
    for (Image i : List.of(image, docker)) {
      CacheClient.assertManifest(
          cache.getManifest("/v2/" + i.repository() + "/manifests/" + i.tag()), i.manifest());
      CacheClient.assertManifest(
          cache.getManifest("/v2/" + i.repository() + "/manifests/" + i.manifest().digest()),
          i.manifest());
      assertBlobs(cache, i.repository(), i);
    }
    CacheClient.assertManifest(
        cache.getManifest("/v2/" + index.repository() + "/manifests/multi"), index.index());
    CacheClient.assertManifest(
        cache.getManifest("/v2/" + index.repository() + "/manifests/" + index.index().digest()),
        index.index());
    for (PlatformImage p : index.platforms()) {
      CacheClient.assertManifest(
          cache.getManifest(
              "/v2/" + index.repository() + "/manifests/" + p.image().manifest().digest()),
          p.image().manifest());
      assertBlobs(cache, index.repository(), p.image());
    }
    // Range requests on a moved blob
    Blob layer = image.layers().get(0);
    HttpResponse<byte[]> range =
        cache.get("/v2/" + image.repository() + "/blobs/" + layer.digest(), "Range", "bytes=10-19");
    assertThat(range.statusCode()).as(describe(range)).isEqualTo(206);
    assertThat(range.body()).isEqualTo(Arrays.copyOfRange(layer.bytes(), 10, 20));
  }

  static void assertBlobs(CacheClient cache, String repository, Image i) {
    for (Blob blob : i.blobs()) {
      HttpResponse<byte[]> response = cache.get("/v2/" + repository + "/blobs/" + blob.digest());
      assertThat(response.statusCode()).as(describe(response)).isEqualTo(200);
      assertThat(response.body()).isEqualTo(blob.bytes());
      assertThat(Sha256.digest(response.body())).isEqualTo(blob.digest());
    }
  }

  private static int managementPort(ManualCache cache) {
    return Integer.parseInt(
        cache.context().getEnvironment().getRequiredProperty("local.management.port"));
  }

  private static int unusedPort() {
    try (ServerSocket s = new ServerSocket(0)) {
      return s.getLocalPort();
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
  }

  /** Copies a tree keeping file times (what {@code cp -a} does). */
  static void copyTree(Path from, Path to) throws IOException {
    List<Path> all;
    try (Stream<Path> walk = Files.walk(from)) {
      all = walk.toList();
    }
    for (Path source : all) {
      Path target = to.resolve(from.relativize(source).toString());
      if (Files.isDirectory(source)) {
        Files.createDirectories(target);
      } else {
        Files.copy(source, target, StandardCopyOption.COPY_ATTRIBUTES);
      }
    }
  }

  static void deleteTree(Path root) throws IOException {
    List<Path> all;
    try (Stream<Path> walk = Files.walk(root)) {
      all = new ArrayList<>(walk.toList());
    }
    Collections.reverse(all);
    for (Path p : all) {
      Files.delete(p);
    }
  }
}
