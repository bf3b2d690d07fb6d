package io.registrycache.api;

import static org.assertj.core.api.Assertions.assertThat;

import com.jayway.jsonpath.JsonPath;
import io.registrycache.it.AbstractCacheIT;
import io.registrycache.testsupport.Command;
import io.registrycache.testsupport.NeedsTool;
import io.registrycache.testsupport.Sha256;
import io.registrycache.testsupport.TestFiles;
import io.registrycache.testsupport.TestImages;
import io.registrycache.testsupport.TestImages.Blob;
import io.registrycache.testsupport.TestImages.Image;
import io.registrycache.testsupport.TestImages.ImageIndex;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * A real OCI client through the cache: {@code skopeo copy} from the in-path form {@code
 * localhost:<port>/upstream.test/<name>:<tag>} into an OCI layout; the copied manifests and blobs
 * are checked independently of skopeo's own verification.
 */
@NeedsTool("skopeo")
class SkopeoIT extends AbstractCacheIT {

  @TempDir Path work;

  @BeforeAll
  static void needsSkopeo() {
    Command.requireTool(
        Command.onPath("skopeo"), "skopeo is not installed (apt-get install skopeo)");
  }

  String source(String repository, String tag) {
    return "docker://localhost:" + port + "/" + UPSTREAM_HOST + "/" + repository + ":" + tag;
  }

  Command.Result skopeo(String... args) {
    List<String> command =
        new ArrayList<>(List.of("skopeo", "--insecure-policy", "--command-timeout", "120s"));
    command.addAll(List.of(args));
    return Command.run(Duration.ofSeconds(150), command).assertSuccess();
  }

  @Test
  void copiesAnImageIntoAnOciLayout() throws IOException {
    Image image =
        upstream.pusher().push(TestImages.smallOci(TestImages.uniqueRepository("skopeo"), "v1"));
    Path layout = work.resolve("layout");

    skopeo(
        "copy",
        "--src-tls-verify=false",
        "--src-no-creds",
        source(image.repository(), "v1"),
        "oci:" + layout + ":v1");

    String index = Files.readString(layout.resolve("index.json"));
    List<String> manifests = JsonPath.read(index, "$.manifests[*].digest");
    assertThat(manifests).containsExactly(image.manifest().digest());
    assertThat(Files.readAllBytes(blobPath(layout, image.manifest().digest())))
        .as("skopeo kept the manifest the cache served, byte for byte")
        .isEqualTo(image.manifest().bytes());
    for (Blob blob : image.blobs()) {
      Path file = blobPath(layout, blob.digest());
      assertThat(file).exists();
      assertThat(Sha256.digest(file)).isEqualTo(blob.digest());
    }
    assertEveryBlobMatchesItsName(layout);
  }

  @Test
  void inspectRawReturnsTheExactManifest() {
    Image image =
        upstream.pusher().push(TestImages.smallOci(TestImages.uniqueRepository("skopeo"), "raw"));
    String raw =
        skopeo(
                "inspect",
                "--raw",
                "--tls-verify=false",
                "--no-creds",
                source(image.repository(), "raw"))
            .output();
    assertThat(raw.strip()).isEqualTo(image.manifest().text().strip());
  }

  @Test
  void copiesAnIndexWithAllPlatforms() throws IOException {
    ImageIndex index =
        upstream
            .pusher()
            .push(TestImages.index(TestImages.uniqueRepository("skopeo-all"), "multi"));
    Path layout = work.resolve("all");

    skopeo(
        "copy",
        "--all",
        "--src-tls-verify=false",
        "--src-no-creds",
        source(index.repository(), "multi"),
        "oci:" + layout + ":multi");

    String indexJson = Files.readString(layout.resolve("index.json"));
    List<String> top = JsonPath.read(indexJson, "$.manifests[*].digest");
    assertThat(top).containsExactly(index.index().digest());
    assertThat(Files.readAllBytes(blobPath(layout, index.index().digest())))
        .isEqualTo(index.index().bytes());
    for (String arch : List.of("amd64", "arm64")) {
      Image platform = index.platform(arch).image();
      assertThat(Files.readAllBytes(blobPath(layout, platform.manifest().digest())))
          .isEqualTo(platform.manifest().bytes());
      for (Blob blob : platform.blobs()) {
        assertThat(Sha256.digest(blobPath(layout, blob.digest()))).isEqualTo(blob.digest());
      }
    }
    assertEveryBlobMatchesItsName(layout);
  }

  static Path blobPath(Path layout, String digest) {
    return layout.resolve("blobs").resolve("sha256").resolve(Sha256.hexOf(digest));
  }

  static void assertEveryBlobMatchesItsName(Path layout) {
    for (Path file : TestFiles.regularFiles(layout.resolve("blobs"))) {
      assertThat(Sha256.digest(file)).isEqualTo("sha256:" + file.getFileName());
    }
  }
}
