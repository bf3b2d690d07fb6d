package io.registrycache.api;

import static org.assertj.core.api.Assertions.assertThat;

import io.registrycache.it.AbstractCacheIT;
import io.registrycache.nodemirror.NodeMirrorHosts;
import io.registrycache.testsupport.Command;
import io.registrycache.testsupport.Containerd;
import io.registrycache.testsupport.NeedsTool;
import io.registrycache.testsupport.TestImages;
import io.registrycache.testsupport.TestImages.Image;
import java.io.IOException;
import java.net.URI;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.Set;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * containerd as a real client: {@code ctr images pull} of {@code upstream.test/<name>:<tag>} with a
 * {@code hosts.toml} that makes the cache a mirror of {@code upstream.test}, so containerd sends
 * the {@code ?ns=upstream.test} form. The image is unpacked too, which checks every layer against
 * the config's diff_ids. Uses the containerd that runs under dockerd, in a namespace of its own.
 */
@NeedsTool("ctr")
class ContainerdIT extends AbstractCacheIT {

  @TempDir Path hostsDir;

  final Containerd containerd = new Containerd();

  @BeforeAll
  static void needsContainerd() {
    Containerd.require();
  }

  @AfterEach
  void removeImages() {
    containerd.removePulled();
  }

  @Test
  void pullsAndUnpacksThroughTheCacheAsAMirror() throws IOException {
    Image image =
        upstream.pusher().push(TestImages.smallOci(TestImages.uniqueRepository("ctr"), "v1"));
    Containerd.writeHostsToml(hostsDir, UPSTREAM_HOST, port);
    String ref = UPSTREAM_HOST + "/" + image.repository() + ":v1";

    Command.Result pull = containerd.pull(hostsDir, ref);
    assertThat(pull.exitCode()).as(pull.output()).isZero();
    assertThat(pull.output())
        .as("containerd used the cache as a mirror with ?ns=")
        .contains(
            "url=\"http://localhost:"
                + port
                + "/v2/"
                + image.repository()
                + "/manifests/v1?ns="
                + UPSTREAM_HOST
                + "\"");

    Command.Result list = containerd.ctr("images", "ls");
    assertThat(list.output()).contains(ref).contains(image.manifest().digest());

    assertPulledThroughTheCache(image, ref);
  }

  /**
   * containerd holds the exact manifest pushed, unpacked (every layer matched its diff_id), and the
   * upstream served each blob once: the pull went through the cache.
   */
  private void assertPulledThroughTheCache(Image image, String ref) {
    Command.Result manifest = containerd.ctr("content", "get", image.manifest().digest());
    assertThat(manifest.exitCode()).as(manifest.output()).isZero();
    assertThat(manifest.output()).isEqualTo(image.manifest().text());
    assertThat(containerd.complete(ref)).as(containerd.ctr("images", "check").output()).isTrue();
    upstream.syncLogs();
    for (var blob : image.blobs()) {
      assertThat(
              upstream.countRequests(
                  "GET", "/v2/" + image.repository() + "/blobs/" + blob.digest()))
          .isEqualTo(1);
    }
  }

  /**
   * The node mirror generator's folder (what the chart's DaemonSet writes into a node's
   * /etc/containerd/certs.d) for three registries, and {@code ctr} pulling through the cache with
   * {@code --hosts-dir} on it. The fallback {@code server} is {@code https://upstream.test}, which
   * does not resolve here: the image can only have come through the cache.
   */
  @Test
  void pullsThroughTheCacheWithTheGeneratorsHostsFolder() throws IOException {
    Image image =
        upstream.pusher().push(TestImages.smallOci(TestImages.uniqueRepository("mirror"), "v1"));
    NodeMirrorHosts.Outcome outcome =
        new NodeMirrorHosts(URI.create("http://localhost:" + port), null)
            .write(
                hostsDir,
                List.of(
                    NodeMirrorHosts.Registry.of(UPSTREAM_HOST),
                    NodeMirrorHosts.Registry.of("registry.example.com"),
                    NodeMirrorHosts.Registry.of("ghcr.io")));
    assertThat(outcome.written())
        .containsExactlyInAnyOrder(UPSTREAM_HOST, "registry.example.com", "ghcr.io");
    assertThat(Files.readString(hostsDir.resolve(UPSTREAM_HOST).resolve("hosts.toml")))
        .startsWith(NodeMirrorHosts.MARK)
        .contains("server = \"https://" + UPSTREAM_HOST + "\"");
    String ref = UPSTREAM_HOST + "/" + image.repository() + ":v1";

    Command.Result pull = containerd.pull(hostsDir, ref);
    assertThat(pull.exitCode()).as(pull.output()).isZero();
    assertThat(pull.output())
        .as("containerd used the cache as a mirror with ?ns=")
        .contains(
            "url=\"http://localhost:"
                + port
                + "/v2/"
                + image.repository()
                + "/manifests/v1?ns="
                + UPSTREAM_HOST
                + "\"");
    assertPulledThroughTheCache(image, ref);

    // uninstall: the generator's files go, and containerd no longer has a mirror for the registry
    assertThat(NodeMirrorHosts.removeAll(hostsDir).removed())
        .isEqualTo(Set.of(UPSTREAM_HOST, "registry.example.com", "ghcr.io"));
    try (var left = Files.list(hostsDir)) {
      assertThat(left).isEmpty();
    }
  }
}
