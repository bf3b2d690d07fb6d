package io.registrycache.api;

import static io.registrycache.testsupport.CacheClient.describe;
import static io.registrycache.testsupport.CacheClient.errorCode;
import static org.assertj.core.api.Assertions.assertThat;

import io.registrycache.it.AbstractCacheIT;
import io.registrycache.testsupport.CacheClient;
import io.registrycache.testsupport.Command;
import io.registrycache.testsupport.Containerd;
import io.registrycache.testsupport.GoTools;
import io.registrycache.testsupport.Sha256;
import io.registrycache.testsupport.TestFiles;
import io.registrycache.testsupport.TestImages;
import io.registrycache.testsupport.TestImages.Blob;
import io.registrycache.testsupport.TestImages.Image;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.Base64;
import java.util.List;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.springframework.boot.test.web.server.LocalManagementPort;
import org.springframework.security.crypto.bcrypt.BCryptPasswordEncoder;
import org.springframework.test.context.DynamicPropertyRegistry;
import org.springframework.test.context.DynamicPropertySource;

/**
 * Issue 23, who may pull: the cache with {@code registry-cache.auth.enabled}, over real HTTP,
 * against a real {@code registry:2}. Users (bcrypt htpasswd) and a robot (tokens file) log in with
 * Basic; rules allow alice {@code it/allowed-*} of upstream {@code local}, the robot everything,
 * anonymous {@code it/public-*}; the upstream's pull-through list refuses {@code it/blocked-*}
 * whoever asks. Every refused request is checked not to have reached the upstream.
 */
class PullAuthIT extends AbstractCacheIT {

  static final String REALM = "registry-cache it";
  static final String ROBOT_TOKEN = "9b1e4c7a2d5f8e0b3a6c9d2e5f8a1b4c7d0e3f6a";
  static final Path files = TestFiles.tempDirectory("pull-auth-it-");

  @LocalManagementPort int managementPort;
  @TempDir Path work;

  @DynamicPropertySource
  static void auth(DynamicPropertyRegistry registry) {
    try {
      Files.writeString(
          files.resolve("htpasswd"),
          "alice:"
              + new BCryptPasswordEncoder(4).encode("s3cret")
              + "\n"
              + "bob:"
              + new BCryptPasswordEncoder(4).encode("hunter2")
              + "\n");
      Files.writeString(files.resolve("tokens"), "ci:" + ROBOT_TOKEN + "\n");
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
    registry.add("registry-cache.auth.enabled", () -> "true");
    registry.add("registry-cache.auth.realm", () -> REALM);
    registry.add("registry-cache.auth.htpasswd-file", () -> files.resolve("htpasswd").toString());
    registry.add("registry-cache.auth.tokens-file", () -> files.resolve("tokens").toString());
    registry.add("registry-cache.auth.rules[0].subjects", () -> "user:alice");
    registry.add("registry-cache.auth.rules[0].upstreams", () -> "local");
    registry.add("registry-cache.auth.rules[0].repositories", () -> "it/allowed-*");
    registry.add("registry-cache.auth.rules[1].subjects", () -> "robot:ci");
    registry.add("registry-cache.auth.rules[1].repositories", () -> "**");
    registry.add("registry-cache.auth.rules[2].subjects", () -> "anonymous");
    registry.add("registry-cache.auth.rules[2].repositories", () -> "it/public-*");
    registry.add("registry-cache.upstreams.local.pull-through.deny", () -> "it/blocked-*");
  }

  static String basic(String user, String password) {
    return "Basic "
        + Base64.getEncoder()
            .encodeToString((user + ":" + password).getBytes(StandardCharsets.UTF_8));
  }

  static final String ALICE = basic("alice", "s3cret");
  static final String BOB = basic("bob", "hunter2");
  static final String CI = basic("ci", ROBOT_TOKEN);

  private HttpResponse<byte[]> get(String path, String authorization) {
    return authorization == null
        ? cache.get(path, "Accept", CacheClient.MANIFEST_ACCEPT)
        : cache.get(path, "Accept", CacheClient.MANIFEST_ACCEPT, "Authorization", authorization);
  }

  private static void assertUnauthorized(HttpResponse<byte[]> response) {
    assertThat(response.statusCode()).as(describe(response)).isEqualTo(401);
    assertThat(errorCode(response)).isEqualTo("UNAUTHORIZED");
    assertThat(response.headers().firstValue("WWW-Authenticate"))
        .hasValue("Basic realm=\"" + REALM + "\", charset=\"UTF-8\"");
  }

  private static void assertDenied(HttpResponse<byte[]> response) {
    assertThat(response.statusCode()).as(describe(response)).isEqualTo(403);
    assertThat(errorCode(response)).isEqualTo("DENIED");
  }

  /** Requests the upstream has seen for {@code repository} so far (the push's included). */
  private static long upstreamRequests(String repository) {
    upstream.syncLogs();
    return upstream.countRequestsUnder("/v2/" + repository + "/");
  }

  private static void assertUpstreamNotAskedAgain(String repository, long afterPush) {
    assertThat(upstreamRequests(repository))
        .as("upstream requests for %s since its push", repository)
        .isEqualTo(afterPush);
  }

  /**
   * Manifest by tag and every blob, with {@code authorization}, each checked against its digest.
   */
  private void pullAndVerify(String base, Image image, String authorization) {
    HttpResponse<byte[]> manifest = get(base + "/manifests/" + image.tag(), authorization);
    assertThat(manifest.statusCode()).as(describe(manifest)).isEqualTo(200);
    assertThat(Sha256.digest(manifest.body())).isEqualTo(image.manifest().digest());
    assertThat(manifest.headers().firstValue("Docker-Content-Digest"))
        .hasValue(image.manifest().digest());
    for (Blob blob : image.blobs()) {
      HttpResponse<byte[]> response = get(base + "/blobs/" + blob.digest(), authorization);
      assertThat(response.statusCode()).as(describe(response)).isEqualTo(200);
      assertThat(Sha256.digest(response.body())).isEqualTo(blob.digest());
    }
  }

  @Test
  void baseEndpointChallengesWithoutCredentialsAndAnswersWithThem() {
    assertUnauthorized(get("/v2/", null));
    HttpResponse<byte[]> head = cache.head("/v2/");
    assertThat(head.statusCode()).isEqualTo(401);
    assertThat(head.headers().firstValue("WWW-Authenticate")).isPresent();
    assertThat(get("/v2/", ALICE).statusCode()).isEqualTo(200);
    assertThat(get("/v2/", CI).statusCode()).isEqualTo(200);
    assertUnauthorized(get("/v2/", basic("alice", "wrong")));
  }

  @Test
  void rightBasicCredentialsPullManifestAndBlobsInEveryForm() {
    Image image =
        upstream.pusher().push(TestImages.smallOci(TestImages.uniqueRepository("allowed"), "v1"));
    pullAndVerify("/v2/" + image.repository(), image, ALICE);
    pullAndVerify("/v2/" + UPSTREAM_HOST + "/" + image.repository(), image, ALICE);
    HttpResponse<byte[]> ns =
        get("/v2/" + image.repository() + "/manifests/v1?ns=" + UPSTREAM_HOST, ALICE);
    assertThat(ns.statusCode()).as(describe(ns)).isEqualTo(200);
    assertThat(Sha256.digest(ns.body())).isEqualTo(image.manifest().digest());
    HttpResponse<byte[]> tags = get("/v2/" + image.repository() + "/tags/list", ALICE);
    assertThat(tags.statusCode()).as(describe(tags)).isEqualTo(200);
    assertThat(new String(tags.body(), StandardCharsets.UTF_8)).contains("\"v1\"");
  }

  @Test
  void wrongOrMissingCredentialsAre401AndNeverReachTheUpstream() {
    Image image =
        upstream.pusher().push(TestImages.smallOci(TestImages.uniqueRepository("allowed"), "v1"));
    long afterPush = upstreamRequests(image.repository());
    String manifest = "/v2/" + image.repository() + "/manifests/v1";
    assertUnauthorized(get(manifest, basic("alice", "S3cret")));
    assertUnauthorized(get(manifest, basic("mallory", "s3cret")));
    assertUnauthorized(get(manifest, basic("ci", ROBOT_TOKEN.substring(1))));
    assertUnauthorized(get(manifest, null));
    assertUnauthorized(
        get("/v2/" + image.repository() + "/blobs/" + image.config().digest(), null));
    HttpResponse<byte[]> head = cache.head(manifest);
    assertThat(head.statusCode()).isEqualTo(401);
    assertThat(head.body()).isEmpty();
    assertUpstreamNotAskedAgain(image.repository(), afterPush);
  }

  @Test
  void malformedCredentialsAre401NotServerErrors() {
    String manifest = "/v2/" + TestImages.uniqueRepository("allowed") + "/manifests/v1";
    for (String header :
        List.of(
            "Basic",
            "Basic !!!",
            "Basic " + Base64.getEncoder().encodeToString("nocolon".getBytes()),
            "Basic " + Base64.getEncoder().encodeToString(new byte[] {'a', ':', (byte) 0xff}),
            "Bearer abc.def.ghi",
            "Digest username=\"alice\"",
            "basic " + ALICE.substring(6) + "====",
            "Basic " + "QUFB".repeat(2047))) {
      assertUnauthorized(get(manifest, header));
    }
  }

  @Test
  void anOverlongAuthorizationHeaderIs401AndAHugeOneNeverAServerError() {
    assertUnauthorized(get("/v2/it/allowed-x/manifests/v1", "Basic " + "QUFB".repeat(3000)));
    HttpResponse<byte[]> huge =
        get("/v2/it/allowed-x/manifests/v1", "Basic " + "QUFB".repeat(5000));
    assertThat(huge.statusCode())
        .as("beyond server.max-http-request-header-size: %s", describe(huge))
        .isEqualTo(431);
  }

  @Test
  void aKnownUserOnAForbiddenRepositoryIsDeniedInEveryFormAndEndpoint() {
    Image image =
        upstream.pusher().push(TestImages.smallOci(TestImages.uniqueRepository("secret"), "v1"));
    String name = image.repository();
    long afterPush = upstreamRequests(name);
    for (String path :
        List.of(
            "/v2/" + name + "/manifests/v1",
            "/v2/" + name + "/manifests/" + image.manifest().digest(),
            "/v2/" + name + "/blobs/" + image.config().digest(),
            "/v2/" + UPSTREAM_HOST + "/" + name + "/manifests/v1",
            "/v2/" + name + "/manifests/v1?ns=" + UPSTREAM_HOST,
            "/v2/" + name.toUpperCase() + "/manifests/v1",
            "/v2/it/allowed-x/../" + name.substring(3) + "/manifests/v1",
            "/v2/it/allowed-x%2F..%2F" + name.substring(3) + "/manifests/v1",
            "/v2/" + name + "/tags/list",
            "/v2/" + name + "/referrers/" + image.manifest().digest())) {
      HttpResponse<byte[]> response = get(path, ALICE);
      assertThat(response.statusCode()).as("%s: %s", path, describe(response)).isIn(400, 403, 404);
      if (response.statusCode() == 403) {
        assertDenied(response);
      } else {
        assertThat(errorCode(response)).as(path).isIn("NAME_INVALID", "NAME_UNKNOWN");
      }
    }
    assertDenied(get("/v2/" + name + "/manifests/v1", ALICE));
    assertDenied(get("/v2/" + UPSTREAM_HOST + "/" + name + "/manifests/v1", ALICE));
    assertDenied(get("/v2/" + name + "/manifests/v1?ns=" + UPSTREAM_HOST, ALICE));
    assertDenied(get("/v2/" + name + "/tags/list", ALICE));
    assertDenied(get("/v2/" + name + "/referrers/" + image.manifest().digest(), BOB));
    assertUnauthorized(get("/v2/" + name + "/manifests/v1", null));
    assertUpstreamNotAskedAgain(name, afterPush);

    pullAndVerify("/v2/" + name, image, CI);
  }

  @Test
  void anonymousPullsWhatTheAnonymousRuleAllowsAndNothingElse() {
    Image open =
        upstream.pusher().push(TestImages.smallOci(TestImages.uniqueRepository("public"), "v1"));
    pullAndVerify("/v2/" + open.repository(), open, null);
    Image closed =
        upstream.pusher().push(TestImages.smallOci(TestImages.uniqueRepository("allowed"), "v1"));
    long afterPush = upstreamRequests(closed.repository());
    assertUnauthorized(get("/v2/" + closed.repository() + "/manifests/v1", null));
    assertUnauthorized(
        get("/v2/" + UPSTREAM_HOST + "/" + closed.repository() + "/manifests/v1", null));
    assertUnauthorized(
        get("/v2/" + closed.repository() + "/manifests/v1?ns=" + UPSTREAM_HOST, null));
    assertUpstreamNotAskedAgain(closed.repository(), afterPush);
  }

  @Test
  void aPullThroughDeniedNameNeverReachesTheUpstreamNorIsPreloaded() {
    Image image =
        upstream.pusher().push(TestImages.smallOci(TestImages.uniqueRepository("blocked"), "v1"));
    long afterPush = upstreamRequests(image.repository());
    for (String path :
        List.of(
            "/v2/" + image.repository() + "/manifests/v1",
            "/v2/" + UPSTREAM_HOST + "/" + image.repository() + "/manifests/v1",
            "/v2/"
                + image.repository()
                + "/blobs/"
                + image.config().digest()
                + "?ns="
                + UPSTREAM_HOST,
            "/v2/" + image.repository() + "/tags/list")) {
      HttpResponse<byte[]> response = get(path, CI);
      assertThat(response.statusCode()).as("%s: %s", path, describe(response)).isEqualTo(404);
      assertThat(errorCode(response)).isEqualTo("NAME_UNKNOWN");
    }
    HttpResponse<byte[]> preload =
        CacheClient.onPort(managementPort)
            .postJson(
                "/actuator/cache/preload",
                "{\"references\":\"" + UPSTREAM_HOST + "/" + image.repository() + ":v1\"}");
    assertThat(preload.statusCode()).as(describe(preload)).isEqualTo(400);
    assertThat(new String(preload.body(), StandardCharsets.UTF_8))
        .contains("is not served through upstream");
    assertUpstreamNotAskedAgain(image.repository(), afterPush);
  }

  @Test
  void theManagementPortIsNotAffected() {
    HttpResponse<byte[]> health = CacheClient.onPort(managementPort).get("/actuator/health");
    assertThat(health.statusCode()).as(describe(health)).isEqualTo(200);
  }

  @Test
  void skopeoCopiesWithSourceCredentials() throws IOException {
    Command.requireTool(
        Command.onPath("skopeo"), "skopeo is not installed (apt-get install skopeo)");
    Image image =
        upstream.pusher().push(TestImages.smallOci(TestImages.uniqueRepository("allowed"), "v1"));
    Path layout = work.resolve("layout");
    String source =
        "docker://localhost:" + port + "/" + UPSTREAM_HOST + "/" + image.repository() + ":v1";
    Command.Result refused =
        Command.run(
            Duration.ofSeconds(150),
            List.of(
                "skopeo",
                "--insecure-policy",
                "copy",
                "--src-tls-verify=false",
                "--src-creds",
                "alice:wrong",
                source,
                "oci:" + layout + ":v1"));
    assertThat(refused.exitCode()).as(refused.output()).isNotZero();
    Command.run(
            Duration.ofSeconds(150),
            List.of(
                "skopeo",
                "--insecure-policy",
                "--command-timeout",
                "120s",
                "copy",
                "--src-tls-verify=false",
                "--src-creds",
                "alice:s3cret",
                source,
                "oci:" + layout + ":v1"))
        .assertSuccess();
    for (Blob blob : image.blobs()) {
      Path file = layout.resolve("blobs/sha256/" + blob.digest().substring("sha256:".length()));
      assertThat(Sha256.digest(file)).isEqualTo(blob.digest());
    }
    assertThat(
            Sha256.digest(layout.resolve("blobs/sha256/" + image.manifest().digest().substring(7))))
        .isEqualTo(image.manifest().digest());

    // Anonymous, as skopeo is without credentials (it answers the Basic challenge with empty ones).
    Image open =
        upstream.pusher().push(TestImages.smallOci(TestImages.uniqueRepository("public"), "v1"));
    Path authFile = Files.writeString(work.resolve("auth.json"), "{}");
    Command.run(
            Duration.ofSeconds(150),
            List.of(
                "skopeo",
                "--insecure-policy",
                "--command-timeout",
                "120s",
                "copy",
                "--src-tls-verify=false",
                "--src-authfile",
                authFile.toString(),
                "docker://localhost:"
                    + port
                    + "/"
                    + UPSTREAM_HOST
                    + "/"
                    + open.repository()
                    + ":v1",
                "oci:" + work.resolve("open") + ":v1"))
        .assertSuccess();
    assertThat(
            Sha256.digest(
                work.resolve("open/blobs/sha256/" + open.manifest().digest().substring(7))))
        .isEqualTo(open.manifest().digest());
  }

  /**
   * containerd as the client: a mirror gets only the fixed header of {@code hosts.toml}; with the
   * robot's Basic credentials there the image pulls and unpacks, without them the pull fails (the
   * mirror answers 401 and the fallback {@code server} is not reachable).
   */
  @Test
  void containerdPullsWithTheRobotsBasicHeaderFromHostsTomlAndNotWithout() throws IOException {
    Containerd.require();
    Containerd containerd = new Containerd();
    Image image =
        upstream.pusher().push(TestImages.smallOci(TestImages.uniqueRepository("ctr-auth"), "v1"));
    String ref = UPSTREAM_HOST + "/" + image.repository() + ":v1";
    try {
      Path without = Files.createDirectories(work.resolve("hosts-without"));
      Containerd.writeHostsToml(without, UPSTREAM_HOST, port);
      Command.Result refused = containerd.pull(without, ref);
      assertThat(refused.exitCode()).as(refused.output()).isNotZero();
      assertThat(refused.output()).contains("401");

      Path with = Files.createDirectories(work.resolve("hosts-with"));
      Containerd.writeHostsToml(with, UPSTREAM_HOST, port, CI);
      Command.Result pulled = containerd.pull(with, ref);
      assertThat(pulled.exitCode()).as(pulled.output()).isZero();
      assertThat(containerd.complete(ref)).as(containerd.ctr("images", "check").output()).isTrue();
      Command.Result manifest = containerd.ctr("content", "get", image.manifest().digest());
      assertThat(manifest.output()).isEqualTo(image.manifest().text());
    } finally {
      containerd.removePulled();
    }
  }

  /**
   * crane with its own login (a Docker config of the test's own, never the user's) and oras with
   * {@code -u/-p}: each refused without credentials, and with the robot's pulls the image, checked
   * against its digests (crane verifies every blob it writes; the manifest is compared byte for
   * byte).
   */
  @Test
  void craneAndOrasPullWithTheirOwnLoginsAndAreRefusedWithout() throws IOException {
    Path crane = GoTools.require("crane");
    Path oras = GoTools.require("oras");
    Image image =
        upstream
            .pusher()
            .push(TestImages.smallOci(TestImages.uniqueRepository("go-clients"), "v1"));
    String host = "localhost:" + port;
    String ref = host + "/" + image.repository() + ":v1";
    Path config = Files.createDirectories(work.resolve("docker-config"));
    String dockerConfig = "DOCKER_CONFIG=" + config;
    Duration limit = Duration.ofMinutes(2);

    Command.Result refused =
        Command.run(limit, "env", dockerConfig, crane.toString(), "digest", "--insecure", ref);
    assertThat(refused.exitCode()).as(refused.output()).isNotZero();
    assertThat(refused.output()).contains("UNAUTHORIZED");
    Command.run(
            limit,
            "env",
            dockerConfig,
            crane.toString(),
            "auth",
            "login",
            host,
            "-u",
            "ci",
            "-p",
            ROBOT_TOKEN)
        .assertSuccess();
    assertThat(
            Command.run(limit, "env", dockerConfig, crane.toString(), "digest", "--insecure", ref)
                .assertSuccess()
                .output()
                .strip())
        .isEqualTo(image.manifest().digest());
    Path layout = work.resolve("crane-oci");
    Command.run(
            limit,
            "env",
            dockerConfig,
            crane.toString(),
            "pull",
            "--insecure",
            "--format",
            "oci",
            ref,
            layout.toString())
        .assertSuccess();
    for (Blob blob : image.blobs()) {
      Path file = layout.resolve("blobs/sha256/" + blob.digest().substring("sha256:".length()));
      assertThat(Sha256.digest(Files.readAllBytes(file))).isEqualTo(blob.digest());
    }

    Command.Result orasRefused =
        Command.run(limit, oras.toString(), "manifest", "fetch", "--plain-http", ref);
    assertThat(orasRefused.exitCode()).as(orasRefused.output()).isNotZero();
    Path manifest = work.resolve("oras-manifest.json");
    Command.run(
            limit,
            oras.toString(),
            "manifest",
            "fetch",
            "--plain-http",
            "-u",
            "ci",
            "-p",
            ROBOT_TOKEN,
            "--output",
            manifest.toString(),
            ref)
        .assertSuccess();
    assertThat(Sha256.digest(Files.readAllBytes(manifest))).isEqualTo(image.manifest().digest());
  }

  /**
   * Docker as the client: {@code docker login} to the cache (a Docker config of the test's own) and
   * {@code docker pull} of an image through it; refused before the login. The engine treats {@code
   * localhost} as a plain-HTTP registry. The pulled image's repository digest is the pushed
   * manifest's.
   */
  @Test
  void dockerLogsInToTheCacheAndPullsThroughIt() throws IOException {
    Command.requireTool(
        Command.onPath("docker")
            && Command.run(Duration.ofSeconds(20), "docker", "info").exitCode() == 0,
        "no Docker engine answers");
    Image image =
        upstream
            .pusher()
            .push(TestImages.smallOci(TestImages.uniqueRepository("docker-login"), "v1"));
    String host = "localhost:" + port;
    String ref = host + "/" + image.repository() + ":v1";
    String config = Files.createDirectories(work.resolve("docker-client-config")).toString();
    Duration limit = Duration.ofMinutes(2);
    try {
      Command.Result refused = Command.run(limit, "docker", "--config", config, "pull", ref);
      assertThat(refused.exitCode()).as(refused.output()).isNotZero();
      Command.run(limit, "docker", "--config", config, "login", host, "-u", "ci", "-p", ROBOT_TOKEN)
          .assertSuccess();
      Command.run(limit, "docker", "--config", config, "pull", ref).assertSuccess();
      Command.Result digests =
          Command.run(limit, "docker", "image", "inspect", "--format", "{{json .RepoDigests}}", ref)
              .assertSuccess();
      assertThat(digests.output())
          .contains(host + "/" + image.repository() + "@" + image.manifest().digest());
    } finally {
      Command.run(limit, "docker", "image", "rm", "--force", ref);
    }
  }
}
