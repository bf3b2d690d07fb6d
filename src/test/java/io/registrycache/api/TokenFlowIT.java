package io.registrycache.api;

import static io.registrycache.testsupport.CacheClient.describe;
import static io.registrycache.testsupport.CacheClient.errorCode;
import static org.assertj.core.api.Assertions.assertThat;

import io.registrycache.it.AbstractCacheIT;
import io.registrycache.testsupport.CacheClient;
import io.registrycache.testsupport.Command;
import io.registrycache.testsupport.Sha256;
import io.registrycache.testsupport.TestFiles;
import io.registrycache.testsupport.TestImages;
import io.registrycache.testsupport.TestImages.Blob;
import io.registrycache.testsupport.TestImages.Image;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.net.URLEncoder;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.time.Instant;
import java.util.Base64;
import java.util.List;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.springframework.security.crypto.bcrypt.BCryptPasswordEncoder;
import org.springframework.test.context.DynamicPropertyRegistry;
import org.springframework.test.context.DynamicPropertySource;
import tools.jackson.databind.JsonNode;
import tools.jackson.databind.json.JsonMapper;

/**
 * Issue 23, the Docker token flow with the cache as its own token server ({@code
 * registry-cache.auth.token.enabled}), over real HTTP against a real {@code registry:2}: the Bearer
 * challenge, tokens from GET (Basic) and POST (password grant) that carry only the scopes the rules
 * allow, a token for one repository refused for another, forged tokens refused, and Basic still
 * accepted on every request.
 */
class TokenFlowIT extends AbstractCacheIT {

  static final Path files = TestFiles.tempDirectory("token-flow-it-");
  static final JsonMapper JSON = JsonMapper.builder().build();

  @TempDir Path work;

  @DynamicPropertySource
  static void auth(DynamicPropertyRegistry registry) {
    try {
      Files.writeString(
          files.resolve("htpasswd"),
          "alice:" + new BCryptPasswordEncoder(4).encode("s3cret") + "\n");
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
    registry.add("registry-cache.auth.enabled", () -> "true");
    registry.add("registry-cache.auth.htpasswd-file", () -> files.resolve("htpasswd").toString());
    registry.add("registry-cache.auth.token.enabled", () -> "true");
    registry.add("registry-cache.auth.rules[0].subjects", () -> "user:alice");
    registry.add("registry-cache.auth.rules[0].repositories", () -> "it/allowed-*");
  }

  static final String ALICE =
      "Basic "
          + Base64.getEncoder().encodeToString("alice:s3cret".getBytes(StandardCharsets.UTF_8));

  private String realm() {
    return "http://localhost:" + port + "/v2/token";
  }

  private JsonNode tokenResponse(HttpResponse<byte[]> response) {
    assertThat(response.statusCode()).as(describe(response)).isEqualTo(200);
    assertThat(response.headers().firstValue("Cache-Control")).hasValue("no-store");
    JsonNode body = JSON.readTree(response.body());
    assertThat(body.path("token").asString()).isNotEmpty();
    assertThat(body.path("access_token").asString()).isEqualTo(body.path("token").asString());
    assertThat(body.path("expires_in").asLong()).isEqualTo(300);
    assertThat(Instant.parse(body.path("issued_at").asString()))
        .isBetween(Instant.now().minusSeconds(60), Instant.now().plusSeconds(5));
    return body;
  }

  private String tokenFor(String authorization, String... repositories) {
    StringBuilder query = new StringBuilder("/v2/token?service=registry-cache");
    for (String repository : repositories) {
      query
          .append("&scope=")
          .append(URLEncoder.encode("repository:" + repository + ":pull", StandardCharsets.UTF_8));
    }
    HttpResponse<byte[]> response =
        authorization == null
            ? cache.get(query.toString())
            : cache.get(query.toString(), "Authorization", authorization);
    return tokenResponse(response).path("token").asString();
  }

  private HttpResponse<byte[]> get(String path, String authorization) {
    return cache.get(path, "Accept", CacheClient.MANIFEST_ACCEPT, "Authorization", authorization);
  }

  private void pullAndVerify(Image image, String authorization) {
    HttpResponse<byte[]> manifest =
        get("/v2/" + image.repository() + "/manifests/" + image.tag(), authorization);
    assertThat(manifest.statusCode()).as(describe(manifest)).isEqualTo(200);
    assertThat(Sha256.digest(manifest.body())).isEqualTo(image.manifest().digest());
    for (Blob blob : image.blobs()) {
      HttpResponse<byte[]> response =
          get("/v2/" + image.repository() + "/blobs/" + blob.digest(), authorization);
      assertThat(response.statusCode()).as(describe(response)).isEqualTo(200);
      assertThat(Sha256.digest(response.body())).isEqualTo(blob.digest());
    }
  }

  private void assertScopeChallenge(HttpResponse<byte[]> response, String repository) {
    assertThat(response.statusCode()).as(describe(response)).isEqualTo(401);
    assertThat(errorCode(response)).isEqualTo("UNAUTHORIZED");
    assertThat(response.headers().firstValue("WWW-Authenticate"))
        .hasValue(
            "Bearer realm=\""
                + realm()
                + "\",service=\"registry-cache\",scope=\"repository:"
                + repository
                + ":pull\"");
  }

  @Test
  void theBaseEndpointChallengesWithBearer() {
    HttpResponse<byte[]> response = cache.get("/v2/");
    assertThat(response.statusCode()).isEqualTo(401);
    assertThat(response.headers().firstValue("WWW-Authenticate"))
        .hasValue("Bearer realm=\"" + realm() + "\",service=\"registry-cache\"");
    assertThat(get("/v2/", ALICE).statusCode()).as("Basic stays accepted").isEqualTo(200);
  }

  @Test
  void aTokenGrantsOnlyTheAllowedScopesAndWorksForThoseOnly() {
    Image allowed =
        upstream.pusher().push(TestImages.smallOci(TestImages.uniqueRepository("allowed"), "v1"));
    Image other =
        upstream.pusher().push(TestImages.smallOci(TestImages.uniqueRepository("allowed"), "v1"));
    Image secret =
        upstream.pusher().push(TestImages.smallOci(TestImages.uniqueRepository("secret"), "v1"));
    String token = tokenFor(ALICE, allowed.repository(), secret.repository());
    String bearer = "Bearer " + token;
    String claims =
        new String(Base64.getUrlDecoder().decode(token.split("\\.")[1]), StandardCharsets.UTF_8);
    assertThat(claims).contains(allowed.repository()).doesNotContain(secret.repository());

    pullAndVerify(allowed, bearer);
    assertThat(get("/v2/", bearer).statusCode()).isEqualTo(200);
    assertScopeChallenge(
        get("/v2/" + other.repository() + "/manifests/v1", bearer), other.repository());
    assertScopeChallenge(
        get("/v2/" + secret.repository() + "/manifests/v1", bearer), secret.repository());
    assertScopeChallenge(
        get("/v2/" + UPSTREAM_HOST + "/" + allowed.repository() + "/manifests/v1", bearer),
        UPSTREAM_HOST + "/" + allowed.repository());
    pullAndVerify(other, ALICE);
    HttpResponse<byte[]> denied = get("/v2/" + secret.repository() + "/manifests/v1", ALICE);
    assertThat(denied.statusCode()).as(describe(denied)).isEqualTo(403);
  }

  @Test
  void thePasswordGrantIssuesTokensAndRefusesWhatItMust() {
    Image image =
        upstream.pusher().push(TestImages.smallOci(TestImages.uniqueRepository("allowed"), "v1"));
    String form =
        "grant_type=password&service=registry-cache&client_id=it&username=alice&password=s3cret&scope="
            + URLEncoder.encode(
                "repository:" + image.repository() + ":pull", StandardCharsets.UTF_8);
    HttpResponse<byte[]> response =
        cache.send(
            "POST",
            "/v2/token",
            form.getBytes(StandardCharsets.UTF_8),
            "Content-Type",
            "application/x-www-form-urlencoded");
    pullAndVerify(image, "Bearer " + tokenResponse(response).path("token").asString());

    HttpResponse<byte[]> wrong =
        cache.send(
            "POST",
            "/v2/token",
            form.replace("s3cret", "wrong").getBytes(StandardCharsets.UTF_8),
            "Content-Type",
            "application/x-www-form-urlencoded");
    assertThat(wrong.statusCode()).as(describe(wrong)).isEqualTo(400);
    assertThat(JSON.readTree(wrong.body()).path("error").asString()).isEqualTo("invalid_grant");
    HttpResponse<byte[]> refresh =
        cache.send(
            "POST",
            "/v2/token",
            "grant_type=refresh_token&refresh_token=x".getBytes(StandardCharsets.UTF_8),
            "Content-Type",
            "application/x-www-form-urlencoded");
    assertThat(refresh.statusCode()).isEqualTo(400);
    assertThat(JSON.readTree(refresh.body()).path("error").asString())
        .isEqualTo("unsupported_grant_type");
  }

  @Test
  void wrongCredentialsGetNoTokenAndForgedTokensAreRefused() {
    Image image =
        upstream.pusher().push(TestImages.smallOci(TestImages.uniqueRepository("allowed"), "v1"));
    HttpResponse<byte[]> wrong =
        cache.get(
            "/v2/token?service=registry-cache&scope=repository:" + image.repository() + ":pull",
            "Authorization",
            "Basic "
                + Base64.getEncoder()
                    .encodeToString("alice:nope".getBytes(StandardCharsets.UTF_8)));
    assertThat(wrong.statusCode()).as(describe(wrong)).isEqualTo(401);
    assertThat(wrong.headers().firstValue("WWW-Authenticate").orElse("")).startsWith("Basic ");

    String anonymous = tokenFor(null, image.repository());
    assertThat(
            new String(
                Base64.getUrlDecoder().decode(anonymous.split("\\.")[1]), StandardCharsets.UTF_8))
        .as("anonymous gets a token without the scope")
        .doesNotContain(image.repository());
    assertScopeChallenge(
        get("/v2/" + image.repository() + "/manifests/v1", "Bearer " + anonymous),
        image.repository());

    String token = tokenFor(ALICE, image.repository());
    String[] parts = token.split("\\.");
    String none =
        Base64.getUrlEncoder()
            .withoutPadding()
            .encodeToString("{\"alg\":\"none\"}".getBytes(StandardCharsets.UTF_8));
    for (String forged :
        List.of(
            none + "." + parts[1] + ".",
            parts[0] + "." + parts[1] + "." + parts[2].substring(2),
            "garbage",
            parts[0] + "." + parts[1])) {
      HttpResponse<byte[]> response =
          get("/v2/" + image.repository() + "/manifests/v1", "Bearer " + forged);
      assertThat(response.statusCode()).as(describe(response)).isEqualTo(401);
      assertThat(errorCode(response)).isEqualTo("UNAUTHORIZED");
    }
  }

  @Test
  void skopeoFollowsTheTokenFlow() throws IOException {
    Command.requireTool(
        Command.onPath("skopeo"), "skopeo is not installed (apt-get install skopeo)");
    Image image =
        upstream.pusher().push(TestImages.smallOci(TestImages.uniqueRepository("allowed"), "v1"));
    Path layout = work.resolve("layout");
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
                "docker://localhost:" + port + "/" + image.repository() + ":v1",
                "oci:" + layout + ":v1"))
        .assertSuccess();
    for (Blob blob : image.blobs()) {
      assertThat(Sha256.digest(layout.resolve("blobs/sha256/" + blob.digest().substring(7))))
          .isEqualTo(blob.digest());
    }
  }
}
