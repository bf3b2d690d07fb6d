package io.registrycache.admin;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import com.sun.security.auth.module.UnixSystem;
import io.registrycache.oci.Digest;
import io.registrycache.testsupport.CacheClient;
import io.registrycache.testsupport.CacheProperties;
import io.registrycache.testsupport.Command;
import io.registrycache.testsupport.ManualCache;
import io.registrycache.testsupport.TestImages;
import io.registrycache.testsupport.TestImages.Image;
import io.registrycache.testsupport.UpstreamRegistryContainer;
import java.io.IOException;
import java.io.OutputStream;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.channels.FileChannel;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.time.Duration;
import java.util.Arrays;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.stream.Stream;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.Test;
import org.springframework.beans.factory.annotation.Autowired;
import org.springframework.boot.test.context.SpringBootTest;
import org.springframework.boot.test.web.server.LocalManagementPort;
import org.springframework.boot.test.web.server.LocalServerPort;
import org.springframework.context.ApplicationContext;
import org.springframework.test.context.DynamicPropertyRegistry;
import org.springframework.test.context.DynamicPropertySource;
import tools.jackson.databind.json.JsonMapper;

/**
 * Issue 7 point 8: the cache volume fills up during pulls. The storage is a tmpfs of {@value
 * #DISK_MB} MiB this test mounts (root needed: skipped elsewhere, but it fails under {@code
 * CI=true} so CI cannot skip it silently). Once full: readiness is DOWN, a new blob answers 507
 * with an OCI body and leaves nothing in {@code tmp/}, content cached before still pulls with the
 * right bytes; freed, the new image pulls.
 */
@SpringBootTest(webEnvironment = SpringBootTest.WebEnvironment.RANDOM_PORT)
class FullDiskIT {

  static final int DISK_MB = 16;
  static final Path storage = mountTmpfs();

  @LocalServerPort int port;
  @Autowired ApplicationContext context;
  @LocalManagementPort int managementPort;

  static final UpstreamRegistryContainer upstream = UpstreamRegistryContainer.started();

  @DynamicPropertySource
  static void properties(DynamicPropertyRegistry registry) {
    CacheProperties.cache(storage)
        .localUpstream(upstream.hostAndPort(), upstream::baseUrl)
        .set("management.health.diskspace.threshold", "1MB")
        .addTo(registry);
  }

  private static Path mountTmpfs() {
    boolean root = new UnixSystem().getUid() == 0;
    if (!root && Command.inCi()) {
      throw new IllegalStateException(
          "FullDiskIT mounts a tmpfs and needs root; CI must run it as root");
    }
    if (!root) {
      return null;
    }
    try {
      Path dir = Files.createTempDirectory("registry-cache-fulldisk-");
      run("mount", "-t", "tmpfs", "-o", "size=" + DISK_MB + "m", "tmpfs", dir.toString());
      return dir;
    } catch (IOException e) {
      throw new IllegalStateException(e);
    }
  }

  private static void run(String... command) {
    try {
      Process p = new ProcessBuilder(command).redirectErrorStream(true).start();
      String out = new String(p.getInputStream().readAllBytes());
      if (!p.waitFor(30, TimeUnit.SECONDS) || p.exitValue() != 0) {
        throw new IllegalStateException(String.join(" ", command) + " failed: " + out);
      }
    } catch (IOException e) {
      throw new IllegalStateException(e);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new IllegalStateException(e);
    }
  }

  @AfterAll
  static void unmount() {
    if (storage != null) {
      run("umount", "-l", storage.toString());
    }
  }

  private HttpResponse<byte[]> readiness() {
    return CacheClient.onPort(managementPort).get("/actuator/health/readiness");
  }

  private static String text(HttpResponse<byte[]> response) {
    return new String(response.body(), StandardCharsets.UTF_8);
  }

  /** Writes until the file system says ENOSPC; the file is what the test removes to free space. */
  private static Path fill() throws IOException {
    Path filler = storage.resolve("filler");
    byte[] chunk = new byte[64 * 1024];
    try (OutputStream out = Files.newOutputStream(filler)) {
      for (int size = chunk.length; size > 0; size /= 2) {
        try {
          while (true) {
            out.write(chunk, 0, size);
            out.flush();
          }
        } catch (IOException full) {
          assertThat(full.getMessage()).containsIgnoringCase("No space left on device");
        }
      }
    } catch (IOException closingAFullFile) {
      // nothing buffered is left to lose
    }
    return filler;
  }

  private List<Path> tmpFiles() throws IOException {
    try (Stream<Path> files = Files.list(storage.resolve("tmp"))) {
      return files.toList();
    }
  }

  @Test
  void aFullCacheVolumeFailsReadinessAndNewFillsCleanlyWhileCachedContentServes() throws Exception {
    Assumptions.assumeTrue(
        storage != null, "FullDiskIT needs root to mount a tmpfs (CI runs it as root)");
    CacheClient cache = CacheClient.onPort(port);
    Image cached =
        upstream
            .pusher()
            .push(TestImages.withLayers("full/cached", "v1", TestImages.randomBytes(300_000, 1)));
    Image fresh =
        upstream
            .pusher()
            .push(TestImages.withLayers("full/fresh", "v1", TestImages.randomBytes(3_000_000, 2)));
    cache.pullAndVerify(cached);
    ManualCache.awaitDownloadsCommitted(context);
    assertThat(readiness().statusCode()).isEqualTo(200);

    Path filler = fill();

    HttpResponse<byte[]> down = readiness();
    assertThat(down.statusCode())
        .as("readiness with the cache volume full: %s", text(down))
        .isEqualTo(503);
    assertThat(text(down)).contains("\"diskSpace\"").contains(storage.toString());
    Digest layer = Digest.parse(fresh.blobs().get(1).digest());
    HttpResponse<byte[]> blob = cache.get("/v2/" + fresh.repository() + "/blobs/" + layer);
    assertThat(blob.statusCode()).as(text(blob)).isEqualTo(507);
    var error = JsonMapper.builder().build().readTree(text(blob)).path("errors").path(0);
    assertThat(error.path("code").asText()).isEqualTo("UNKNOWN");
    assertThat(error.path("message").asText()).contains("storage is full");
    assertThat(tmpFiles()).as("nothing left behind in tmp/").isEmpty();
    assertThat(storage.resolve("blobs/sha256/" + layer.hex().substring(0, 2) + "/" + layer.hex()))
        .doesNotExist();

    cache.pullAndVerify(cached); // from the disk, every digest checked

    Files.delete(filler);
    assertThat(readiness().statusCode()).isEqualTo(200);
    cache.pullAndVerify(fresh);
  }

  /**
   * The volume fills while a blob streams in: the client never gets a complete 200 of those bytes
   * (an error status, or a body cut short that it notices), the partial file is gone, the blob is
   * not stored; with room again the same pull succeeds.
   */
  @Test
  void aVolumeThatFillsDuringAPullLeavesNothingAndTheClientNoticesTheCut() throws Exception {
    Assumptions.assumeTrue(
        storage != null, "FullDiskIT needs root to mount a tmpfs (CI runs it as root)");
    byte[] layerBytes = TestImages.randomBytes(6_000_000, 3);
    Image during = upstream.pusher().push(TestImages.withLayers("full/during", "v1", layerBytes));
    Digest layer = Digest.parse(during.blobs().get(1).digest());

    Path filler = fill();
    long leaveFree = 2L * 1024 * 1024; // less than the blob: the fill runs out of space part-way
    try (FileChannel channel = FileChannel.open(filler, StandardOpenOption.WRITE)) {
      channel.truncate(Math.max(0, channel.size() - leaveFree));
    }

    HttpClient http = HttpClient.newHttpClient();
    HttpRequest request =
        HttpRequest.newBuilder(
                URI.create(
                    "http://127.0.0.1:" + port + "/v2/" + during.repository() + "/blobs/" + layer))
            .build();
    try {
      HttpResponse<byte[]> response = http.send(request, HttpResponse.BodyHandlers.ofByteArray());
      boolean completeAndCorrect =
          response.statusCode() == 200 && Arrays.equals(response.body(), layerBytes);
      assertThat(completeAndCorrect)
          .as(
              "a complete 200 of a blob the cache could not store (status %d, %d bytes)",
              response.statusCode(), response.body().length)
          .isFalse();
      assertThat(response.statusCode()).isIn(200, 507); // 200 only with a short body
    } catch (IOException cut) {
      // The body was cut mid-stream after the headers went out: what a client must notice.
    }

    await()
        .atMost(Duration.ofSeconds(10))
        .untilAsserted(() -> assertThat(tmpFiles()).as("the partial download deleted").isEmpty());
    assertThat(storage.resolve("blobs/sha256/" + layer.hex().substring(0, 2) + "/" + layer.hex()))
        .doesNotExist();

    Files.delete(filler);
    CacheClient.onPort(port).pullAndVerify(during);
  }
}
