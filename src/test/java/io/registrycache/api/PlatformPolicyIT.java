package io.registrycache.api;

import static io.registrycache.testsupport.CacheClient.describe;
import static org.assertj.core.api.Assertions.assertThat;

import com.jayway.jsonpath.JsonPath;
import io.registrycache.it.AbstractCacheIT;
import io.registrycache.testsupport.Command;
import io.registrycache.testsupport.Containerd;
import io.registrycache.testsupport.GoTools;
import io.registrycache.testsupport.NeedsGoTool;
import io.registrycache.testsupport.NeedsTool;
import io.registrycache.testsupport.Sha256;
import io.registrycache.testsupport.TestImages;
import io.registrycache.testsupport.TestImages.Blob;
import io.registrycache.testsupport.TestImages.Image;
import io.registrycache.testsupport.TestImages.ImageIndex;
import java.io.IOException;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.springframework.test.context.DynamicPropertyRegistry;
import org.springframework.test.context.DynamicPropertySource;

/**
 * The platform policy with real clients (skopeo, crane, containerd's ctr) and a real multi-platform
 * index in registry:2: repositories {@code it/platform/**} allow {@code linux/amd64} only. The
 * allowed platform pulls, digests checked; the other is refused with 403 {@code DENIED} and its
 * manifest is never asked of the upstream (registry:2's own request log).
 */
class PlatformPolicyIT extends AbstractCacheIT {

  static final Duration LIMIT = Duration.ofSeconds(150);

  @TempDir Path work;

  @DynamicPropertySource
  static void policy(DynamicPropertyRegistry registry) {
    registry.add("registry-cache.policy.rules[0].repositories", () -> "it/platform/**");
    registry.add("registry-cache.policy.rules[0].platforms", () -> "linux/amd64");
  }

  private String reference(String repository, String tagOrDigest) {
    return "localhost:"
        + port
        + "/"
        + UPSTREAM_HOST
        + "/"
        + repository
        + (tagOrDigest.startsWith("sha256:") ? "@" : ":")
        + tagOrDigest;
  }

  private static Command.Result skopeo(String... args) {
    List<String> command =
        new java.util.ArrayList<>(
            List.of("skopeo", "--insecure-policy", "--command-timeout", "120s"));
    command.addAll(List.of(args));
    return Command.run(LIMIT, command);
  }

  private Command.Result skopeoCopy(String repository, Path layout, String... options) {
    List<String> args =
        new java.util.ArrayList<>(List.of("copy", "--src-tls-verify=false", "--src-no-creds"));
    args.addAll(List.of(options));
    args.add("docker://" + reference(repository, "multi"));
    args.add("oci:" + layout + ":multi");
    return skopeo(args.toArray(String[]::new));
  }

  private static long upstreamManifestRequests(String repository, Image image) {
    upstream.syncLogs();
    String path = "/v2/" + repository + "/manifests/" + image.manifest().digest();
    return upstream.countRequests("GET", path) + upstream.countRequests("HEAD", path);
  }

  @Test
  @NeedsTool("skopeo")
  void skopeoPullsTheAllowedPlatformAndIsDeniedTheOtherWhichTheUpstreamNeverSees()
      throws IOException {
    ImageIndex index =
        upstream
            .pusher()
            .push(TestImages.index(TestImages.uniqueRepository("platform/skopeo"), "multi"));
    String repo = index.repository();
    Image amd64 = index.platform("amd64").image();
    Image arm64 = index.platform("arm64").image();

    Path allowed = work.resolve("amd64");
    skopeoCopy(repo, allowed, "--override-os", "linux", "--override-arch", "amd64").assertSuccess();
    assertThat(Files.readAllBytes(SkopeoIT.blobPath(allowed, amd64.manifest().digest())))
        .as("the amd64 manifest, byte for byte")
        .isEqualTo(amd64.manifest().bytes());
    for (Blob blob : amd64.blobs()) {
      assertThat(Sha256.digest(SkopeoIT.blobPath(allowed, blob.digest()))).isEqualTo(blob.digest());
    }
    SkopeoIT.assertEveryBlobMatchesItsName(allowed);

    Command.Result refused =
        skopeoCopy(
            repo, work.resolve("arm64"), "--override-os", "linux", "--override-arch", "arm64");
    assertThat(refused.exitCode()).as(refused.output()).isNotZero();
    assertThat(refused.output())
        .as("skopeo shows the cache's reason")
        .containsIgnoringCase("denied")
        .contains("platform linux/arm64")
        .contains("policy platforms=[linux/amd64]");

    Command.Result all = skopeoCopy(repo, work.resolve("all"), "--all");
    assertThat(all.exitCode()).as("every platform of the index: " + all.output()).isNotZero();

    HttpResponse<byte[]> direct =
        cache.getManifest("/v2/" + repo + "/manifests/" + arm64.manifest().digest());
    assertThat(direct.statusCode()).as(describe(direct)).isEqualTo(403);
    String body = new String(direct.body(), StandardCharsets.UTF_8);
    assertThat(JsonPath.<String>read(body, "$.errors[0].code")).isEqualTo("DENIED");
    assertThat(JsonPath.<String>read(body, "$.errors[0].message"))
        .isEqualTo(
            "platform linux/arm64 of local/" // the upstream's key, as the rule names it
                + repo
                + "@"
                + arm64.manifest().digest()
                + " is not allowed by policy platforms=[linux/amd64]");

    assertThat(upstreamManifestRequests(repo, arm64))
        .as("requests for the refused manifest that reached registry:2")
        .isZero();
    assertThat(upstreamManifestRequests(repo, amd64)).isEqualTo(1);
  }

  @Test
  void ctrPullsTheAllowedPlatformAndIsDeniedTheOther() throws IOException {
    Containerd.require();
    Containerd containerd = new Containerd();
    try {
      ImageIndex index =
          upstream
              .pusher()
              .push(TestImages.index(TestImages.uniqueRepository("platform/ctr"), "multi"));
      String repo = index.repository();
      Image amd64 = index.platform("amd64").image();
      Image arm64 = index.platform("arm64").image();
      Path hosts = work.resolve("hosts");
      Containerd.writeHostsToml(hosts, UPSTREAM_HOST, port);
      String ref = UPSTREAM_HOST + "/" + repo + ":multi";

      Command.Result pull = containerd.pull(hosts, ref, "linux/amd64");
      assertThat(pull.exitCode()).as(pull.output()).isZero();
      Command.Result manifest = containerd.ctr("content", "get", amd64.manifest().digest());
      assertThat(manifest.output())
          .as("the amd64 manifest containerd stored (it checks the digest)")
          .isEqualTo(amd64.manifest().text());
      for (Blob blob : amd64.blobs()) {
        assertThat(containerd.ctr("content", "get", blob.digest()).exitCode())
            .as("blob %s in containerd's content store", blob.digest())
            .isZero();
      }

      Command.Result refused = containerd.pull(hosts, ref, "linux/arm64");
      assertThat(refused.exitCode()).as(refused.output()).isNotZero();
      assertThat(refused.output()).as(refused.output()).contains("403");
      assertThat(upstreamManifestRequests(repo, arm64))
          .as("requests for the refused manifest that reached registry:2")
          .isZero();
    } finally {
      containerd.removePulled();
    }
  }

  @Test
  @NeedsGoTool("crane")
  void craneGetsTheIndexAsPushedAndTheAllowedChildButIsDeniedTheOther() {
    Path crane = GoTools.require("crane");
    ImageIndex index =
        upstream
            .pusher()
            .push(TestImages.index(TestImages.uniqueRepository("platform/crane"), "multi"));
    String repo = index.repository();
    Image amd64 = index.platform("amd64").image();
    Image arm64 = index.platform("arm64").image();

    String digest =
        Command.run(LIMIT, crane.toString(), "digest", "--insecure", reference(repo, "multi"))
            .assertSuccess()
            .output()
            .strip();
    assertThat(digest).as("the index's digest is the one pushed").isEqualTo(index.index().digest());
    String child =
        Command.run(
                LIMIT,
                crane.toString(),
                "digest",
                "--insecure",
                "--platform",
                "linux/amd64",
                reference(repo, "multi"))
            .assertSuccess()
            .output()
            .strip();
    assertThat(child).isEqualTo(amd64.manifest().digest());

    Command.Result refused =
        Command.run(
            LIMIT,
            crane.toString(),
            "manifest",
            "--insecure",
            reference(repo, arm64.manifest().digest()));
    assertThat(refused.exitCode()).as(refused.output()).isNotZero();
    assertThat(refused.output()).contains("DENIED").contains("platform linux/arm64");
    assertThat(upstreamManifestRequests(repo, arm64)).isZero();
  }
}
