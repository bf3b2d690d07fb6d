package io.registrycache.api;

import static org.assertj.core.api.Assertions.assertThat;

import io.registrycache.it.AbstractCacheIT;
import io.registrycache.testsupport.Command;
import io.registrycache.testsupport.TestImages;
import io.registrycache.testsupport.TestImages.Image;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * containerd as a real client: {@code ctr images pull} of {@code upstream.test/<name>:<tag>} with a
 * {@code hosts.toml} that makes the cache a mirror of {@code upstream.test}, so containerd sends the
 * {@code ?ns=upstream.test} form. The image is unpacked too, which checks every layer against the
 * config's diff_ids. Uses the containerd that runs under dockerd, in a namespace of its own.
 */
class ContainerdIT extends AbstractCacheIT {

  static final String SOCKET =
      System.getProperty("registrycache.containerd.socket", "/var/run/docker/containerd/containerd.sock");
  static final String NAMESPACE = "registry-cache-test";

  @TempDir Path hostsDir;

  final List<String> pulled = new ArrayList<>();

  @BeforeAll
  static void needsContainerd() {
    Command.requireTool(Command.onPath("ctr"), "containerd's ctr is not installed (comes with docker.io)");
    Command.requireTool(Files.exists(Path.of(SOCKET)), "no containerd socket at " + SOCKET);
    Command.Result version = Command.run(Duration.ofSeconds(20), "ctr", "-a", SOCKET, "version");
    Command.requireTool(version.exitCode() == 0, "containerd at " + SOCKET + " does not answer: " + version.output());
  }

  @AfterEach
  void removeImages() {
    for (String ref : pulled) {
      Command.run(Duration.ofSeconds(60), "ctr", "-a", SOCKET, "-n", NAMESPACE, "images", "rm", "--sync", ref);
    }
  }

  Command.Result ctr(String... args) {
    List<String> command = new ArrayList<>(List.of("ctr", "-a", SOCKET, "-n", NAMESPACE));
    command.addAll(List.of(args));
    return Command.run(Duration.ofSeconds(150), command);
  }

  void writeHostsToml() throws IOException {
    Path dir = Files.createDirectories(hostsDir.resolve(UPSTREAM_HOST));
    Files.writeString(
        dir.resolve("hosts.toml"),
        "server = \"http://" + UPSTREAM_HOST + "\"\n\n"
            + "[host.\"http://localhost:" + port + "\"]\n"
            + "  capabilities = [\"pull\", \"resolve\"]\n");
  }

  @Test
  void pullsAndUnpacksThroughTheCacheAsAMirror() throws IOException {
    Image image = upstream.pusher().push(TestImages.smallOci(TestImages.uniqueRepository("ctr"), "v1"));
    writeHostsToml();
    String ref = UPSTREAM_HOST + "/" + image.repository() + ":v1";
    pulled.add(ref);

    Command.Result pull =
        ctr("--debug", "images", "pull", "--plain-http", "--hosts-dir", hostsDir.toString(), ref);
    assertThat(pull.exitCode()).as(pull.output()).isZero();
    assertThat(pull.output())
        .as("containerd used the cache as a mirror with ?ns=")
        .contains(
            "url=\"http://localhost:" + port + "/v2/" + image.repository() + "/manifests/v1?ns="
                + UPSTREAM_HOST + "\"");

    Command.Result list = ctr("images", "ls");
    assertThat(list.output()).contains(ref).contains(image.manifest().digest());

    // the manifest containerd stored is the exact one pushed
    Command.Result manifest = ctr("content", "get", image.manifest().digest());
    assertThat(manifest.exitCode()).as(manifest.output()).isZero();
    assertThat(manifest.output()).isEqualTo(image.manifest().text());

    // and it was unpacked: every layer matched its diff_id
    Command.Result check = ctr("images", "check");
    assertThat(check.output()).contains(ref);
    assertThat(check.output().lines().filter(l -> l.startsWith(ref)).findFirst().orElse(""))
        .contains("complete");

    // the upstream served the manifest and each blob once: the pull went through the cache
    upstream.syncLogs();
    for (var blob : image.blobs()) {
      assertThat(upstream.countRequests("GET", "/v2/" + image.repository() + "/blobs/" + blob.digest()))
          .isEqualTo(1);
    }
  }
}
