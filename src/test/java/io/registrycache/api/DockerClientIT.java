package io.registrycache.api;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import com.github.dockerjava.api.DockerClient;
import com.github.dockerjava.api.command.InspectImageResponse;
import com.github.dockerjava.api.command.PullImageResultCallback;
import com.github.dockerjava.api.exception.NotFoundException;
import com.jayway.jsonpath.JsonPath;
import io.registrycache.it.AbstractCacheIT;
import io.registrycache.testsupport.TestImages;
import io.registrycache.testsupport.TestImages.Blob;
import io.registrycache.testsupport.TestImages.Image;
import io.registrycache.testsupport.TestImages.ImageIndex;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.testcontainers.DockerClientFactory;

/**
 * The Docker engine as a real client: the engine Testcontainers talks to pulls {@code
 * localhost:<port>/upstream.test/<name>:<tag>} (the in-path form) from the cache, unpacks every
 * layer (which checks it against the config's {@code rootfs.diff_ids}), and pulls it again from the
 * cache alone after {@code docker rmi} with the upstream stopped.
 *
 * <p>The engine is a process on this host: it reaches the service on the loopback port the test
 * started it on, and treats a registry whose name resolves into 127.0.0.0/8 as insecure (plain
 * HTTP), so nothing in the engine's configuration changes. The images are removed from the engine
 * after each test, also when it fails. Using the cache as a {@code registry-mirrors} entry of the
 * engine's {@code daemon.json} needs a daemon restart and is documented in {@code docs/deploy.md},
 * not tested here.
 */
class DockerClientIT extends AbstractCacheIT {

  final DockerClient docker = DockerClientFactory.instance().client();

  /** Every reference pulled into the engine by this test, removed after it. */
  final List<String> pulled = new ArrayList<>();

  boolean upstreamStopped;

  @AfterEach
  void removeImagesAndRestartUpstream() {
    List<RuntimeException> failures = new ArrayList<>();
    for (String ref : pulled) {
      try {
        String id = docker.inspectImageCmd(ref).exec().getId();
        docker.removeImageCmd(id).withForce(true).exec();
      } catch (NotFoundException alreadyGone) {
        // removed by the test itself
      } catch (RuntimeException e) {
        failures.add(e);
      }
    }
    if (upstreamStopped) {
      upstream.startUpstream();
    }
    if (!failures.isEmpty()) {
      throw failures.get(0);
    }
  }

  /** {@code localhost:<cache port>/upstream.test/<repository>}. */
  String inPath(String repository) {
    return "localhost:" + port + "/" + UPSTREAM_HOST + "/" + repository;
  }

  /**
   * {@code docker pull <repository>:<tag>}, 120 s at most; fails with the engine's error message.
   */
  InspectImageResponse pull(String repository, String tag) throws InterruptedException {
    String ref = repository + ":" + tag;
    pulled.add(ref);
    boolean done =
        docker
            .pullImageCmd(repository)
            .withTag(tag)
            .exec(new PullImageResultCallback())
            .awaitCompletion(120, TimeUnit.SECONDS);
    assertThat(done).as("docker pull " + ref + " finished within 120 s").isTrue();
    return docker.inspectImageCmd(ref).exec();
  }

  /** {@code docker rmi <repository>:<tag>}, then checks the engine no longer has the image. */
  void rmi(String repository, String tag, String imageId) {
    docker.removeImageCmd(repository + ":" + tag).exec();
    assertThatThrownBy(() -> docker.inspectImageCmd(imageId).exec())
        .as("the image is gone from the engine after docker rmi")
        .isInstanceOf(NotFoundException.class);
  }

  /** The engine's image is the one pushed: its id is the config digest, its layers the diff_ids. */
  static void assertEngineHas(
      InspectImageResponse inspected, String repository, String manifestDigest, Image image) {
    assertThat(inspected.getId()).as("image id = config digest").isEqualTo(image.config().digest());
    assertThat(inspected.getRepoDigests())
        .as("RepoDigests name the manifest digest pulled")
        .contains(repository + "@" + manifestDigest);
    List<String> diffIds =
        JsonPath.read(
            new String(image.config().bytes(), StandardCharsets.UTF_8), "$.rootfs.diff_ids");
    assertThat(inspected.getRootFS().getLayers())
        .as("every layer unpacked and registered under its diff_id")
        .containsExactlyElementsOf(diffIds);
  }

  long upstreamBlobGets(String repository, Image image) {
    upstream.syncLogs();
    return image.blobs().stream()
        .mapToLong(b -> upstream.countRequests("GET", "/v2/" + repository + "/blobs/" + b.digest()))
        .sum();
  }

  @Test
  void pullsADockerImageInThePathFormAndAgainFromTheCacheWithTheUpstreamStopped()
      throws InterruptedException {
    Image image =
        upstream
            .pusher()
            .push(TestImages.dockerSchema2(TestImages.uniqueRepository("docker"), "v1"));
    String repository = inPath(image.repository());

    InspectImageResponse first = pull(repository, "v1");
    assertEngineHas(first, repository, image.manifest().digest(), image);
    upstream.syncLogs();
    for (Blob blob : image.blobs()) {
      assertThat(
              upstream.countRequests(
                  "GET", "/v2/" + image.repository() + "/blobs/" + blob.digest()))
          .as(
              "the upstream served %s once: the engine's pull went through the cache",
              blob.digest())
          .isEqualTo(1);
    }
    awaitDownloadsCommitted();

    rmi(repository, "v1", first.getId());
    upstream.stopUpstream();
    upstreamStopped = true;

    InspectImageResponse second = pull(repository, "v1");
    assertEngineHas(second, repository, image.manifest().digest(), image);

    upstream.startUpstream();
    upstreamStopped = false;
    assertThat(upstreamBlobGets(image.repository(), image))
        .as("the second pull fetched nothing from the upstream")
        .isEqualTo(image.blobs().size());
  }

  @Test
  void pullsTheEnginesPlatformOfAMultiPlatformIndex() throws InterruptedException {
    ImageIndex index =
        upstream
            .pusher()
            .push(TestImages.index(TestImages.uniqueRepository("docker-index"), "multi"));
    String repository = inPath(index.repository());
    Image hostImage = index.platform(TestImages.hostArchitecture()).image();

    InspectImageResponse pulledImage = pull(repository, "multi");
    assertEngineHas(pulledImage, repository, index.index().digest(), hostImage);

    String other = TestImages.hostArchitecture().equals("amd64") ? "arm64" : "amd64";
    assertThat(upstreamBlobGets(index.repository(), index.platform(other).image()))
        .as("no blob of the other platform was fetched")
        .isZero();
    assertThat(upstreamBlobGets(index.repository(), hostImage))
        .as("each blob of the engine's platform fetched once")
        .isEqualTo(hostImage.blobs().size());
  }
}
