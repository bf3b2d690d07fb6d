package io.registrycache.api;

import static io.registrycache.testsupport.CacheClient.describe;
import static io.registrycache.testsupport.CacheClient.errorCode;
import static org.assertj.core.api.Assertions.assertThat;

import io.registrycache.it.AbstractCacheIT;
import io.registrycache.oci.Json;
import io.registrycache.testsupport.CacheClient;
import io.registrycache.testsupport.ImagePusher;
import io.registrycache.testsupport.Sha256;
import io.registrycache.testsupport.TestFiles;
import io.registrycache.testsupport.TestImages;
import io.registrycache.testsupport.TestImages.Blob;
import io.registrycache.testsupport.TestImages.Image;
import io.registrycache.testsupport.TestTokenServer;
import io.registrycache.testsupport.UpstreamRegistryContainer;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.net.URLEncoder;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Base64;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;
import org.springframework.security.crypto.bcrypt.BCryptPasswordEncoder;
import org.springframework.test.context.DynamicPropertyRegistry;
import org.springframework.test.context.DynamicPropertySource;

/**
 * Issue 23 point 4 on one upstream where users may pull different repositories: a real {@code
 * registry:2} with token authentication behind {@link TestTokenServer} (alice and carol may pull
 * {@code team-a/*}, bob {@code team-b/*}), as upstream {@code corp} with {@code credentials:
 * passthrough}. The cache runs its own authentication and token server too, and knows none of these
 * users: they log in to the cache with their upstream credentials, as Basic on each request or at
 * the cache's token endpoint (OAuth2 password grant), and the cache passes them on. Each pulls only
 * their own, byte-exact; what one cached is served to another only once the upstream confirmed that
 * one's access, and a user the upstream refuses gets no byte of it.
 */
class PassthroughTokenIT extends AbstractCacheIT {

  static final String HOST = "corp.test";
  static final String SERVICE = "corp-registry";
  static final Map<String, String> PASSWORDS =
      Map.of(
          "alice",
          "alice-Upstream-1",
          "carol",
          "carol-Upstream-2",
          "bob",
          "bob-Upstream-3",
          "pusher",
          "pusher-4");
  static final String TEAM_A = "team-a/app-" + TestImages.RUN_ID;
  static final String TEAM_B = "team-b/app-" + TestImages.RUN_ID;

  static final TestTokenServer tokens =
      new TestTokenServer(
          SERVICE,
          PASSWORDS,
          (user, repository) -> {
            if (user.equals("pusher")) {
              return List.of("pull", "push");
            }
            String team = user.equals("bob") ? "team-b/" : "team-a/";
            return repository.startsWith(team) ? List.of("pull") : List.of();
          });
  static final UpstreamRegistryContainer corp = started();
  static final Image imageA = push(TEAM_A);
  static final Image imageB = push(TEAM_B);
  static final Path files = TestFiles.tempDirectory("passthrough-token-it-");

  private static UpstreamRegistryContainer started() {
    UpstreamRegistryContainer registry =
        new UpstreamRegistryContainer()
            .withTokenAuth(
                tokens.realm(), SERVICE, TestTokenServer.ISSUER, tokens.rootCertificatePem());
    registry.start();
    return registry;
  }

  private static Image push(String repository) {
    ImagePusher pusher =
        ImagePusher.withAuthorization(
            corp.baseUrl(),
            "Bearer " + tokens.token("pusher", List.of(repository), List.of("pull", "push")));
    return pusher.push(TestImages.smallOci(repository, "v1"));
  }

  @DynamicPropertySource
  static void passthrough(DynamicPropertyRegistry registry) {
    try {
      Files.writeString(
          files.resolve("htpasswd"), "ops:" + new BCryptPasswordEncoder(4).encode("ops-pw") + "\n");
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
    registry.add("registry-cache.auth.enabled", () -> "true");
    registry.add("registry-cache.auth.token.enabled", () -> "true");
    registry.add("registry-cache.auth.htpasswd-file", () -> files.resolve("htpasswd").toString());
    registry.add("registry-cache.auth.rules[0].subjects", () -> "user:ops");
    registry.add("registry-cache.auth.rules[0].upstreams", () -> "corp");
    registry.add("registry-cache.auth.rules[0].repositories", () -> "**");
    registry.add("registry-cache.upstreams.corp.host", () -> HOST);
    registry.add("registry-cache.upstreams.corp.url", corp::baseUrl);
    registry.add("registry-cache.upstreams.corp.credentials", () -> "passthrough");
    // the test's token server is on 127.0.0.1, another origin than the registry, over http
    registry.add("registry-cache.upstreams.corp.redirect.allowed-hosts", () -> "127.0.0.1");
    registry.add("registry-cache.upstreams.corp.send-credentials-over-http", () -> "true");
  }

  static String basic(String user) {
    return "Basic "
        + Base64.getEncoder()
            .encodeToString((user + ":" + PASSWORDS.get(user)).getBytes(StandardCharsets.UTF_8));
  }

  /**
   * A token of the cache's own token endpoint, for the user's upstream credentials (password
   * grant).
   */
  private String cacheToken(String user, String repository) {
    String form =
        "grant_type=password&service=registry-cache&username="
            + user
            + "&password="
            + URLEncoder.encode(PASSWORDS.get(user), StandardCharsets.UTF_8)
            + "&scope="
            + URLEncoder.encode(
                "repository:" + HOST + "/" + repository + ":pull", StandardCharsets.UTF_8);
    HttpResponse<byte[]> response =
        cache.send(
            "POST",
            "/v2/token",
            form.getBytes(StandardCharsets.UTF_8),
            "Content-Type",
            "application/x-www-form-urlencoded");
    assertThat(response.statusCode()).as(describe(response)).isEqualTo(200);
    return "Bearer " + Json.MAPPER.readTree(response.body()).get("access_token").stringValue();
  }

  private HttpResponse<byte[]> get(String path, String authorization) {
    return cache.get(path, "Accept", CacheClient.MANIFEST_ACCEPT, "Authorization", authorization);
  }

  private void pullAndVerify(Image image, String authorization) {
    String base = "/v2/" + HOST + "/" + image.repository();
    HttpResponse<byte[]> manifest = get(base + "/manifests/v1", authorization);
    assertThat(manifest.statusCode()).as(describe(manifest)).isEqualTo(200);
    assertThat(Sha256.digest(manifest.body())).isEqualTo(image.manifest().digest());
    for (Blob blob : image.blobs()) {
      HttpResponse<byte[]> response = get(base + "/blobs/" + blob.digest(), authorization);
      assertThat(response.statusCode()).as(describe(response)).isEqualTo(200);
      assertThat(Sha256.digest(response.body())).isEqualTo(blob.digest());
    }
  }

  /**
   * Manifest by tag and digest, every blob, tags: 401 with the cache's challenge, none of the
   * image's bytes.
   */
  private void assertRefused(Image image, String authorization) {
    String base = "/v2/" + HOST + "/" + image.repository();
    List<String> paths =
        new ArrayList<>(
            List.of(
                base + "/manifests/v1",
                base + "/manifests/" + image.manifest().digest(),
                base + "/tags/list"));
    image.blobs().forEach(b -> paths.add(base + "/blobs/" + b.digest()));
    for (String path : paths) {
      HttpResponse<byte[]> response = get(path, authorization);
      assertThat(response.statusCode()).as("%s: %s", path, describe(response)).isEqualTo(401);
      assertThat(errorCode(response)).isEqualTo("UNAUTHORIZED");
      assertThat(response.headers().firstValue("WWW-Authenticate"))
          .hasValueSatisfying(
              v ->
                  assertThat(v).startsWith("Bearer realm=").contains("service=\"registry-cache\""));
      String digest = Sha256.digest(response.body());
      assertThat(digest).isNotEqualTo(image.manifest().digest());
      image.blobs().forEach(b -> assertThat(digest).isNotEqualTo(b.digest()));
    }
  }

  private static long blobGets(Image image) {
    corp.syncLogs();
    return image.blobs().stream()
        .mapToLong(
            b -> corp.countRequests("GET", "/v2/" + image.repository() + "/blobs/" + b.digest()))
        .sum();
  }

  @Test
  void eachUserPullsOnlyTheirTeamsRepositoryWithTheirOwnUpstreamCredentials() {
    pullAndVerify(
        imageA, cacheToken("alice", TEAM_A)); // credentials given to the cache's token endpoint
    pullAndVerify(imageB, basic("bob")); // Basic on every request
    awaitDownloadsCommitted();
    assertThat(tokens.requests())
        .as("the upstream's token server saw each user's own credentials")
        .anySatisfy(r -> assertThat(r).startsWith("alice repository:" + TEAM_A + ":pull"))
        .anySatisfy(r -> assertThat(r).startsWith("bob repository:" + TEAM_B + ":pull"))
        .noneSatisfy(r -> assertThat(r).startsWith("alice repository:" + TEAM_B))
        .allSatisfy(r -> assertThat(r).doesNotStartWith("pusher"));

    // Cached with bob's credentials; the upstream does not let alice pull team-b, whatever she logs
    // in with.
    assertRefused(imageB, basic("alice"));
    assertRefused(imageB, cacheToken("alice", TEAM_B));
    assertRefused(imageA, basic("bob"));
    assertRefused(imageA, cacheToken("bob", TEAM_A));
  }

  @Test
  void anotherUserOfTheSameTeamIsServedFromTheCacheOnceTheUpstreamConfirms() {
    pullAndVerify(imageA, basic("alice"));
    awaitDownloadsCommitted();
    long fetched = blobGets(imageA);
    pullAndVerify(imageA, cacheToken("carol", TEAM_A));
    assertThat(blobGets(imageA)).as("carol's pull is served from the cache").isEqualTo(fetched);
    assertThat(tokens.requests())
        .as("carol's access was confirmed with her credentials")
        .anySatisfy(r -> assertThat(r).startsWith("carol repository:" + TEAM_A + ":pull"));
  }

  @Test
  void wrongUpstreamPasswordsAndMissingCredentialsAreRefused() {
    pullAndVerify(imageA, basic("alice"));
    String wrong =
        "Basic "
            + Base64.getEncoder()
                .encodeToString("alice:not-her-password".getBytes(StandardCharsets.UTF_8));
    assertRefused(imageA, wrong);
    HttpResponse<byte[]> anonymous = cache.get("/v2/" + HOST + "/" + TEAM_A + "/manifests/v1");
    assertThat(anonymous.statusCode()).as(describe(anonymous)).isEqualTo(401);
    assertThat(tokens.requests())
        .anySatisfy(r -> assertThat(r).isEqualTo("alice (wrong password)"));
  }
}
