package io.registrycache;

import static org.assertj.core.api.Assertions.assertThat;

import io.registrycache.it.AbstractCacheIT;
import io.registrycache.testsupport.ClassesEntered;
import io.registrycache.testsupport.Sha256;
import io.registrycache.testsupport.TestImages;
import io.registrycache.testsupport.TestImages.Blob;
import io.registrycache.testsupport.TestImages.Image;
import java.io.IOException;
import java.net.http.HttpResponse;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Set;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.springframework.test.context.DynamicPropertyRegistry;
import org.springframework.test.context.DynamicPropertySource;

/**
 * docs/architecture.md lists, for each hot path, the source files a request enters as the code runs
 * it. Here a real cold pull goes through the service (real HTTP, a real {@code registry:2}
 * upstream) with every method entry of the main classes recorded ({@link ClassesEntered}), from the
 * request to the blob's commit; the documented list must be exactly the files entered.
 */
class HotPathIT extends AbstractCacheIT {

  private static final Path DOC = Path.of("docs/architecture.md");
  private static final Pattern FILE = Pattern.compile("`([a-z0-9]+/[A-Z][A-Za-z0-9]*)`");

  private static ClassesEntered recorder;

  @DynamicPropertySource
  static void withoutPrefetch(DynamicPropertyRegistry registry) {
    // The manifest path alone: prefetch on manifest, a path of its own in the doc, runs or not by
    // how far the upstream is (blobs.prefetch.min-upstream-latency), which loopback makes a race.
    registry.add("registry-cache.blobs.prefetch.enabled", () -> "false");
  }

  @BeforeAll
  static void hook() {
    recorder = ClassesEntered.install();
  }

  @AfterAll
  static void unhook() {
    if (recorder != null) {
      recorder.close();
    }
  }

  @Test
  void aColdBlobGetEntersTheFilesTheArchitectureLists() throws IOException {
    Image image =
        upstream.pusher().push(TestImages.smallOci(TestImages.uniqueRepository("hot-blob"), "v1"));
    Blob layer = image.layers().get(0);
    warmUpTheContext();

    recorder.start();
    HttpResponse<byte[]> response =
        cache.get("/v2/" + image.repository() + "/blobs/" + layer.digest());
    awaitDownloadsCommitted();
    List<String> entered = recorder.stop();

    assertThat(response.statusCode()).isEqualTo(200);
    assertThat(Sha256.digest(response.body())).isEqualTo(layer.digest());
    assertListed("Files a cold blob GET enters", entered);
  }

  @Test
  void aColdManifestGetByTagEntersTheFilesTheArchitectureLists() throws IOException {
    Image image =
        upstream
            .pusher()
            .push(TestImages.smallOci(TestImages.uniqueRepository("hot-manifest"), "v1"));
    warmUpTheContext();

    recorder.start();
    HttpResponse<byte[]> response =
        cache.getManifest("/v2/" + image.repository() + "/manifests/v1");
    // The manifest is stored before it is answered, so its path ends with the response; what
    // follows (the test's own look at the blob fills in flight) is not the request's path.
    List<String> entered = recorder.stop();
    awaitDownloadsCommitted();

    assertThat(response.statusCode()).isEqualTo(200);
    assertThat(Sha256.digest(response.body())).isEqualTo(image.manifest().digest());
    assertListed("Files a cold manifest GET by tag enters", entered);
  }

  /**
   * One pull of another image first, so what runs once per context (lazy beans, first-use caches)
   * is not counted as the path.
   */
  private void warmUpTheContext() {
    Image other =
        upstream
            .pusher()
            .push(TestImages.smallOci(TestImages.uniqueRepository("hot-warm-up"), "v1"));
    assertThat(cache.getManifest("/v2/" + other.repository() + "/manifests/v1").statusCode())
        .isEqualTo(200);
    for (Blob blob : other.blobs()) {
      assertThat(cache.get("/v2/" + other.repository() + "/blobs/" + blob.digest()).statusCode())
          .isEqualTo(200);
    }
    awaitDownloadsCommitted();
  }

  private static void assertListed(String heading, List<String> entered) throws IOException {
    Set<String> documented = listed(Files.readString(DOC), heading);
    String asDoc = String.join(", ", entered.stream().map(f -> "`" + f + "`").toList());
    assertThat(documented)
        .as(
            "docs/architecture.md \"%s\" against the files entered, in order (%d): %s",
            heading, entered.size(), asDoc)
        .containsExactlyInAnyOrderElementsOf(entered);
  }

  /**
   * The files named in the paragraph that starts with {@code **<heading>**}; none when there is
   * none.
   */
  static Set<String> listed(String doc, String heading) {
    int start = doc.indexOf("**" + heading);
    if (start < 0) {
      return Set.of();
    }
    int end = doc.indexOf("\n\n", start);
    Matcher m = FILE.matcher(doc.substring(start, end < 0 ? doc.length() : end));
    Set<String> files = new LinkedHashSet<>();
    while (m.find()) {
      files.add(m.group(1));
    }
    return files;
  }

  @Test
  void aParagraphsFilesAreReadUpToItsEnd() {
    String doc =
        "x\n\n**Files a test enters** (note): `api/PullRoute`, `proxy/A`,\n`storage/B`.\n\n`proxy/Later`";
    assertThat(listed(doc, "Files a test enters"))
        .containsExactly("api/PullRoute", "proxy/A", "storage/B");
    assertThat(new ArrayList<>(listed(doc, "Files a test enters"))).doesNotContain("proxy/Later");
  }
}
