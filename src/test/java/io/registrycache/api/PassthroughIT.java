package io.registrycache.api;

import static io.registrycache.testsupport.CacheClient.describe;
import static io.registrycache.testsupport.CacheClient.errorCode;
import static org.assertj.core.api.Assertions.assertThat;

import io.registrycache.it.AbstractCacheIT;
import io.registrycache.testsupport.CacheClient;
import io.registrycache.testsupport.Command;
import io.registrycache.testsupport.Command.Result;
import io.registrycache.testsupport.Sha256;
import io.registrycache.testsupport.TestImages;
import io.registrycache.testsupport.TestImages.Blob;
import io.registrycache.testsupport.TestImages.Image;
import io.registrycache.testsupport.UpstreamRegistryContainer;
import java.net.URI;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Base64;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;
import org.junit.jupiter.api.io.TempDir;
import org.springframework.boot.test.system.CapturedOutput;
import org.springframework.boot.test.system.OutputCaptureExtension;
import org.springframework.test.context.DynamicPropertyRegistry;
import org.springframework.test.context.DynamicPropertySource;
import org.springframework.test.context.TestPropertySource;

/**
 * Issue 23 point 4, credential pass-through, over real HTTP against two real {@code registry:2}
 * upstreams with htpasswd users of their own: {@code east} knows alice and carol, {@code west}
 * knows bob (htpasswd gives a registry's every user all of it, so two registries stand for two
 * users with access to different repositories). Both upstreams are {@code credentials:
 * passthrough}; the cache's own authentication stays off. Each user pulls their own, byte-exact;
 * what one user cached is served to another only once the upstream confirmed that user's access,
 * and never to a user the upstream refuses. The clients' passwords and Basic values never appear in
 * the log, with the cache's, Reactor Netty's and Spring Web's loggers at DEBUG.
 */
@ExtendWith(OutputCaptureExtension.class)
// read before the logging system starts, unlike @DynamicPropertySource
@TestPropertySource(
    properties = {
      "logging.level.io.registrycache=DEBUG",
      "logging.level.reactor.netty=DEBUG",
      "logging.level.org.springframework.web=DEBUG"
    })
class PassthroughIT extends AbstractCacheIT {

  static final String EAST_HOST = "east.test";
  static final String WEST_HOST = "west.test";
  static final String ALICE_PASSWORD = "alice-Pa55-7f3e9a";
  static final String CAROL_PASSWORD = "carol-Pa55-1b2c3d";
  static final String BOB_PASSWORD = "bob-Pa55-9e8d7c";

  static final UpstreamRegistryContainer east =
      started(Map.of("alice", ALICE_PASSWORD, "carol", CAROL_PASSWORD));
  static final UpstreamRegistryContainer west = started(Map.of("bob", BOB_PASSWORD));

  static final String ALICE = basic("alice", ALICE_PASSWORD);
  static final String CAROL = basic("carol", CAROL_PASSWORD);
  static final String BOB = basic("bob", BOB_PASSWORD);

  private static UpstreamRegistryContainer started(Map<String, String> users) {
    UpstreamRegistryContainer registry =
        new UpstreamRegistryContainer().withHtpasswd(new LinkedHashMap<>(users));
    registry.start();
    return registry;
  }

  @DynamicPropertySource
  static void passthrough(DynamicPropertyRegistry registry) {
    registry.add("registry-cache.upstreams.east.host", () -> EAST_HOST);
    registry.add("registry-cache.upstreams.east.url", east::baseUrl);
    registry.add("registry-cache.upstreams.east.credentials", () -> "passthrough");
    registry.add("registry-cache.upstreams.west.host", () -> WEST_HOST);
    registry.add("registry-cache.upstreams.west.url", west::baseUrl);
    registry.add("registry-cache.upstreams.west.credentials", () -> "passthrough");
    registry.add("registry-cache.upstreams.west.confirm-access-for", () -> "10m");
  }

  static String basic(String user, String password) {
    return "Basic "
        + Base64.getEncoder()
            .encodeToString((user + ":" + password).getBytes(StandardCharsets.UTF_8));
  }

  private HttpResponse<byte[]> get(String path, String authorization) {
    return authorization == null
        ? cache.get(path, "Accept", CacheClient.MANIFEST_ACCEPT)
        : cache.get(path, "Accept", CacheClient.MANIFEST_ACCEPT, "Authorization", authorization);
  }

  /** Manifest by tag and every blob through the cache, each checked against its digest. */
  private void pullAndVerify(String host, Image image, String authorization) {
    String base = "/v2/" + host + "/" + image.repository();
    HttpResponse<byte[]> manifest = get(base + "/manifests/" + image.tag(), authorization);
    assertThat(manifest.statusCode()).as(describe(manifest)).isEqualTo(200);
    assertThat(Sha256.digest(manifest.body())).isEqualTo(image.manifest().digest());
    for (Blob blob : image.blobs()) {
      HttpResponse<byte[]> response = get(base + "/blobs/" + blob.digest(), authorization);
      assertThat(response.statusCode()).as(describe(response)).isEqualTo(200);
      assertThat(Sha256.digest(response.body())).isEqualTo(blob.digest());
    }
  }

  /**
   * Every way to read {@code image} through the cache: 401 with the Basic challenge, no bytes of
   * it.
   */
  private void assertRefused(String host, Image image, String authorization) {
    String base = "/v2/" + host + "/" + image.repository();
    List<String> paths =
        new ArrayList<>(
            List.of(
                base + "/manifests/" + image.tag(),
                base + "/manifests/" + image.manifest().digest(),
                base + "/tags/list"));
    image.blobs().forEach(b -> paths.add(base + "/blobs/" + b.digest()));
    for (String path : paths) {
      HttpResponse<byte[]> response = get(path, authorization);
      assertThat(response.statusCode()).as("%s: %s", path, describe(response)).isEqualTo(401);
      assertThat(errorCode(response)).isEqualTo("UNAUTHORIZED");
      assertThat(response.headers().firstValue("WWW-Authenticate"))
          .hasValueSatisfying(v -> assertThat(v).startsWith("Basic realm="));
      for (Blob blob : image.blobs()) {
        assertThat(Sha256.digest(response.body())).isNotEqualTo(blob.digest());
      }
      assertThat(Sha256.digest(response.body())).isNotEqualTo(image.manifest().digest());
      HttpResponse<byte[]> head =
          cache.head(path, "Authorization", authorization == null ? basic("", "") : authorization);
      assertThat(head.statusCode()).as("HEAD %s", path).isEqualTo(401);
    }
  }

  private static long blobGets(UpstreamRegistryContainer registry, Image image) {
    registry.syncLogs();
    return image.blobs().stream()
        .mapToLong(
            b ->
                registry.countRequests("GET", "/v2/" + image.repository() + "/blobs/" + b.digest()))
        .sum();
  }

  private static Result skopeo(String... args) {
    List<String> command =
        new ArrayList<>(List.of("skopeo", "--insecure-policy", "--command-timeout", "120s"));
    command.addAll(List.of(args));
    return Command.run(Duration.ofSeconds(150), command);
  }

  /**
   * skopeo, a real client: it learns the challenge from {@code GET /v2/} and sends its credentials.
   */
  @Test
  void skopeoCopiesWithTheUsersOwnCredentialsOnly(@TempDir Path work) throws Exception {
    Command.requireTool(
        Command.onPath("skopeo"), "skopeo is not installed (apt-get install skopeo)");
    Image image =
        east.pusher().push(TestImages.smallOci(TestImages.uniqueRepository("skopeo"), "v1"));
    String source =
        "docker://localhost:" + port + "/" + EAST_HOST + "/" + image.repository() + ":v1";
    Path layout = work.resolve("layout");

    skopeo(
            "copy",
            "--src-tls-verify=false",
            "--src-creds",
            "alice:" + ALICE_PASSWORD,
            source,
            "oci:" + layout + ":v1")
        .assertSuccess();
    for (Blob blob : image.blobs()) {
      Path file = layout.resolve("blobs/sha256/" + blob.digest().substring("sha256:".length()));
      assertThat(Sha256.digest(Files.readAllBytes(file))).isEqualTo(blob.digest());
    }
    awaitDownloadsCommitted();

    Result bob =
        skopeo(
            "copy",
            "--src-tls-verify=false",
            "--src-creds",
            "bob:" + BOB_PASSWORD,
            source,
            "oci:" + work.resolve("bob") + ":v1");
    assertThat(bob.exitCode()).as(bob.output()).isNotZero();
    assertThat(bob.output()).containsIgnoringCase("unauthorized");
    Result anonymous =
        skopeo(
            "copy",
            "--src-tls-verify=false",
            "--src-no-creds",
            source,
            "oci:" + work.resolve("anonymous") + ":v1");
    assertThat(anonymous.exitCode()).as(anonymous.output()).isNotZero();
  }

  @Test
  void theBaseEndpointChallengesAClientWithoutCredentials() {
    HttpResponse<byte[]> anonymous = get("/v2/", null);
    assertThat(anonymous.statusCode()).as(describe(anonymous)).isEqualTo(401);
    assertThat(anonymous.headers().firstValue("WWW-Authenticate"))
        .hasValueSatisfying(v -> assertThat(v).startsWith("Basic realm="));
    assertThat(get("/v2/", ALICE).statusCode()).isEqualTo(200);
  }

  @Test
  void eachUserPullsTheirOwnAndNotTheOthers(CapturedOutput output) {
    Image eastImage =
        east.pusher().push(TestImages.smallOci(TestImages.uniqueRepository("east"), "v1"));
    Image westImage =
        west.pusher().push(TestImages.smallOci(TestImages.uniqueRepository("west"), "v1"));

    pullAndVerify(EAST_HOST, eastImage, ALICE);
    pullAndVerify(WEST_HOST, westImage, BOB);
    awaitDownloadsCommitted();

    // Cached with bob's credentials, but west does not know alice, carol, or a client without any.
    assertRefused(WEST_HOST, westImage, ALICE);
    assertRefused(WEST_HOST, westImage, CAROL);
    assertRefused(WEST_HOST, westImage, null);
    // nor does east know bob, or alice with a wrong password (after alice's own pull was confirmed)
    assertRefused(EAST_HOST, eastImage, BOB);
    assertRefused(EAST_HOST, eastImage, basic("alice", "not-" + ALICE_PASSWORD));
    // Content cached for one upstream is not served through the other by digest either.
    HttpResponse<byte[]> crossed =
        get(
            "/v2/"
                + EAST_HOST
                + "/"
                + eastImage.repository()
                + "/blobs/"
                + westImage.config().digest(),
            ALICE);
    assertThat(crossed.statusCode()).as(describe(crossed)).isEqualTo(404);

    String output1 = output.getAll();
    for (String secret :
        List.of(
            ALICE_PASSWORD,
            CAROL_PASSWORD,
            BOB_PASSWORD,
            ALICE.substring(6),
            BOB.substring(6),
            CAROL.substring(6))) {
      assertThat(output1).as("the log").doesNotContain(secret);
    }
    assertThat(output1)
        .as("the log is at DEBUG and saw the confirmations")
        .contains("DEBUG")
        .contains(
            "confirmed ClientCredential[user=alice, password=***] may pull "
                + eastImage.repository());
  }

  @Test
  void anotherUserTheUpstreamConfirmsIsServedFromTheCache() {
    Image image =
        east.pusher().push(TestImages.smallOci(TestImages.uniqueRepository("shared"), "v1"));
    pullAndVerify(EAST_HOST, image, ALICE);
    awaitDownloadsCommitted();
    long fetched = blobGets(east, image);
    assertThat(fetched).as("blob GETs at east after alice's pull").isEqualTo(image.blobs().size());

    east.syncLogs();
    long carolHeadsBefore =
        east.countRequests("HEAD", "/v2/" + image.repository() + "/manifests/v1");
    pullAndVerify(EAST_HOST, image, CAROL);
    pullAndVerify(EAST_HOST, image, CAROL);
    assertThat(blobGets(east, image))
        .as("carol's pulls are served from the cache")
        .isEqualTo(fetched);
    east.syncLogs();
    assertThat(
            east.countRequests("HEAD", "/v2/" + image.repository() + "/manifests/v1")
                - carolHeadsBefore)
        .as("carol's access confirmed once, then remembered")
        .isEqualTo(1);
  }

  @Test
  void aUserTheUpstreamRefusesDoesNotJoinAnotherUsersDownload() throws Exception {
    Image image =
        west.pusher()
            .push(TestImages.withLargeLayer(TestImages.uniqueRepository("big"), "v1", 16 << 20));
    Blob layer = image.largestLayer();
    String path = "/v2/" + WEST_HOST + "/" + image.repository() + "/blobs/" + layer.digest();
    CompletableFuture<HttpResponse<byte[]>> bobs =
        cache
            .http()
            .sendAsync(
                HttpRequest.newBuilder(URI.create(cache.baseUrl() + path))
                    .header("Authorization", BOB)
                    .GET()
                    .build(),
                HttpResponse.BodyHandlers.ofByteArray());
    // While bob's download is in flight (or stored, if it was quicker), alice is refused by west.
    HttpResponse<byte[]> alices = get(path, ALICE);
    assertThat(alices.statusCode()).as(describe(alices)).isEqualTo(401);
    assertThat(alices.body().length).isLessThan(layer.bytes().length);
    HttpResponse<byte[]> bob = bobs.get(60, TimeUnit.SECONDS);
    assertThat(bob.statusCode()).as(describe(bob)).isEqualTo(200);
    assertThat(Sha256.digest(bob.body())).isEqualTo(layer.digest());
    assertRefused(WEST_HOST, image, ALICE);
  }
}
