package io.registrycache.admin;

import static org.assertj.core.api.Assertions.assertThat;

import io.registrycache.admin.Registry2.Pushed;
import io.registrycache.oci.Digest;
import java.io.IOException;
import java.io.OutputStream;
import java.net.URI;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.stream.Stream;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.Test;
import org.springframework.boot.test.context.SpringBootTest;
import org.springframework.boot.test.web.server.LocalManagementPort;
import org.springframework.boot.test.web.server.LocalServerPort;
import org.springframework.test.context.DynamicPropertyRegistry;
import org.springframework.test.context.DynamicPropertySource;
import tools.jackson.databind.json.JsonMapper;

/**
 * Issue 7 point 8: the cache volume fills up during pulls. The storage is a tmpfs of {@value
 * #DISK_MB} MiB this test mounts (root needed: skipped elsewhere, but it fails under {@code CI=true}
 * so CI cannot skip it silently). Once full: readiness is DOWN, a new blob answers 507 with an OCI
 * body and leaves nothing in {@code tmp/}, content cached before still pulls with the right bytes;
 * freed, the new image pulls.
 */
@SpringBootTest(webEnvironment = SpringBootTest.WebEnvironment.RANDOM_PORT)
class FullDiskIT {

  static final int DISK_MB = 16;
  static final Path storage = mountTmpfs();

  @LocalServerPort int port;
  @LocalManagementPort int managementPort;

  @DynamicPropertySource
  static void properties(DynamicPropertyRegistry registry) {
    registry.add("registry-cache.storage.path", storage::toString);
    registry.add("registry-cache.upstreams.local.url", Registry2::url);
    registry.add("registry-cache.upstreams.local.host", Registry2::hostAndPort);
    registry.add("management.health.diskspace.threshold", () -> "1MB");
    registry.add("management.server.port", () -> "0");
  }

  private static Path mountTmpfs() {
    boolean root = new com.sun.security.auth.module.UnixSystem().getUid() == 0;
    if (!root && "true".equals(System.getenv("CI"))) {
      throw new IllegalStateException("FullDiskIT mounts a tmpfs and needs root; CI must run it as root");
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

  private HttpResponse<String> readiness() throws Exception {
    return Registry2.get("http://127.0.0.1:" + managementPort + "/actuator/health/readiness");
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
    Assumptions.assumeTrue(storage != null, "FullDiskIT needs root to mount a tmpfs (CI runs it as root)");
    String base = "http://127.0.0.1:" + port;
    Pushed cached = Registry2.push("full/cached", "v1", Registry2.random(300_000, 1));
    Pushed fresh = Registry2.push("full/fresh", "v1", Registry2.random(3_000_000, 2));
    Registry2.pull(base, cached);
    assertThat(readiness().statusCode()).isEqualTo(200);

    Path filler = fill();

    HttpResponse<String> down = readiness();
    assertThat(down.statusCode()).as("readiness with the cache volume full: %s", down.body()).isEqualTo(503);
    assertThat(down.body()).contains("\"diskSpace\"").contains(storage.toString());
    Digest layer = fresh.blobs().get(1);
    HttpResponse<String> blob = Registry2.get(base + "/v2/" + fresh.repository() + "/blobs/" + layer);
    assertThat(blob.statusCode()).as(blob.body()).isEqualTo(507);
    var error = JsonMapper.builder().build().readTree(blob.body()).path("errors").path(0);
    assertThat(error.path("code").asText()).isEqualTo("UNKNOWN");
    assertThat(error.path("message").asText()).contains("storage is full");
    assertThat(tmpFiles()).as("nothing left behind in tmp/").isEmpty();
    assertThat(storage.resolve("blobs/sha256/" + layer.hex().substring(0, 2) + "/" + layer.hex())).doesNotExist();

    Registry2.pull(base, cached); // from the disk, every digest checked

    Files.delete(filler);
    assertThat(readiness().statusCode()).isEqualTo(200);
    Registry2.pull(base, fresh);
  }
}
