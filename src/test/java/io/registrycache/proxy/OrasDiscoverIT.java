package io.registrycache.proxy;

import static org.assertj.core.api.Assertions.assertThat;

import io.registrycache.it.AbstractCacheIT;
import io.registrycache.testsupport.Command;
import io.registrycache.testsupport.GoTools;
import io.registrycache.testsupport.TestImages;
import io.registrycache.testsupport.TestImages.Artifact;
import io.registrycache.testsupport.TestImages.Image;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import org.junit.jupiter.api.Test;

/**
 * A real supply-chain client: {@code oras discover} (oras 1.2) lists, through the cache's referrers
 * API, the signature and SBOM of an image in {@code registry:2} (which has no referrers API: the
 * cache answers from the referrers tag schema). Fails under CI when oras is missing.
 */
class OrasDiscoverIT extends AbstractCacheIT {

  static final String SIGNATURE = "application/vnd.dev.cosign.artifact.sig.v1+json";
  static final String SBOM = "application/spdx+json";

  @Test
  void orasDiscoversReferrersThroughTheCache() {
    Path oras = GoTools.require("oras");
    String repo = TestImages.uniqueRepository("oras-discover");
    Image image = upstream.pusher().push(TestImages.smallOci(repo, "v1"));
    Artifact signature =
        upstream.pusher().push(repo, TestImages.artifact(SIGNATURE, image.manifest(), "signature"));
    Artifact sbom =
        upstream.pusher().push(repo, TestImages.artifact(SBOM, image.manifest(), "sbom"));
    upstream.pusher().pushReferrersTag(repo, image.manifest().digest(), List.of(signature, sbom));
    String target = "localhost:" + port + "/" + repo + "@" + image.manifest().digest();
    String path = "/v2/" + repo + "/referrers/" + image.manifest().digest();
    long cold = System.nanoTime();
    assertThat(cache.get(path).statusCode()).isEqualTo(200);
    long coldMs = (System.nanoTime() - cold) / 1_000_000;
    long warm = System.nanoTime();
    assertThat(cache.get(path).statusCode()).isEqualTo(200);
    System.out.printf(
        "referrers via tag schema (registry:2, default TTLs): cold %d ms, warm %d ms%n",
        coldMs, (System.nanoTime() - warm) / 1_000_000);

    // v1.1-referrers-api: oras must use the cache's referrers API, not fall back to the tag.
    Command.Result all =
        Command.run(
                Duration.ofMinutes(1),
                oras.toString(),
                "discover",
                "--plain-http",
                "--distribution-spec",
                "v1.1-referrers-api",
                "--format",
                "json",
                target)
            .assertSuccess();
    assertThat(all.output())
        .contains(signature.manifest().digest(), sbom.manifest().digest(), SIGNATURE, SBOM);

    Command.Result filtered =
        Command.run(
                Duration.ofMinutes(1),
                oras.toString(),
                "discover",
                "--plain-http",
                "--distribution-spec",
                "v1.1-referrers-api",
                "--format",
                "json",
                "--artifact-type",
                SBOM,
                target)
            .assertSuccess();
    assertThat(filtered.output())
        .contains(sbom.manifest().digest())
        .doesNotContain(signature.manifest().digest());
  }
}
