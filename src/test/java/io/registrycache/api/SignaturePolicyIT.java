package io.registrycache.api;

import static io.registrycache.testsupport.CacheClient.describe;
import static org.assertj.core.api.Assertions.assertThat;

import com.jayway.jsonpath.JsonPath;
import io.registrycache.RegistryCacheApplication;
import io.registrycache.oci.Digest;
import io.registrycache.oci.Json;
import io.registrycache.testsupport.AdvancingClock;
import io.registrycache.testsupport.CacheClient;
import io.registrycache.testsupport.CacheProperties;
import io.registrycache.testsupport.Command;
import io.registrycache.testsupport.Containerd;
import io.registrycache.testsupport.GoTools;
import io.registrycache.testsupport.NeedsGoTool;
import io.registrycache.testsupport.NeedsTool;
import io.registrycache.testsupport.Sha256;
import io.registrycache.testsupport.TestFiles;
import io.registrycache.testsupport.TestImages;
import io.registrycache.testsupport.TestImages.Blob;
import io.registrycache.testsupport.TestImages.Image;
import io.registrycache.testsupport.UpstreamRegistryContainer;
import java.io.IOException;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Clock;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Base64;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.springframework.boot.test.context.SpringBootTest;
import org.springframework.boot.test.context.TestConfiguration;
import org.springframework.boot.test.web.server.LocalServerPort;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Primary;
import org.springframework.test.context.DynamicPropertyRegistry;
import org.springframework.test.context.DynamicPropertySource;
import tools.jackson.databind.node.ObjectNode;

/**
 * The signature policy with the real cosign signing images in a {@code registry:2} of this class
 * ({@code cosign sign --key}, no transparency log; in the cosign tag scheme, and as Sigstore
 * bundles among the referrers, cosign 3's default) and real clients pulling through the cache:
 * skopeo, crane, and containerd's ctr where its socket is there. Repositories {@code it/signed/**}
 * require a signature by {@code trusted.pub}. Right key: pulled, digests checked; unsigned, another
 * key, a signature altered in registry:2: refused with 403 {@code DENIED} and the reason, by each
 * client; and an image verified before is still pulled with registry:2 stopped, past its verdict's
 * TTL (the service's clock is moved, not waited on).
 */
@SpringBootTest(
    classes = {RegistryCacheApplication.class, SignaturePolicyIT.TestClock.class},
    webEnvironment = SpringBootTest.WebEnvironment.RANDOM_PORT)
@NeedsGoTool("cosign")
class SignaturePolicyIT {

  static final Duration LIMIT = Duration.ofSeconds(150);
  static final UpstreamRegistryContainer registry = UpstreamRegistryContainer.started();
  static final Path storage = TestFiles.tempDirectory("registry-cache-signature-it-");
  static final Path keys = TestFiles.tempDirectory("registry-cache-signature-keys-");
  static final String HOST = CacheProperties.UPSTREAM_HOST;
  static final AdvancingClock clock = new AdvancingClock();

  static Path cosign;

  @TestConfiguration(proxyBeanMethods = false)
  static class TestClock {
    @Bean
    @Primary
    Clock testClock() {
      return clock;
    }
  }

  @LocalServerPort int port;
  @TempDir Path work;
  CacheClient cache;

  @DynamicPropertySource
  static void properties(DynamicPropertyRegistry properties) {
    CacheProperties.cache(storage)
        .localUpstream(HOST, registry::baseUrl)
        .upstream("retry.max-attempts", "1")
        .upstream("circuit-breaker.enabled", "false")
        .upstream("connect-timeout", "2s")
        .set("registry-cache.manifests.tag-ttl", "1h")
        .set("registry-cache.policy.rules[0].repositories", "it/signed/**")
        .set("registry-cache.policy.rules[0].require", "signed")
        .set("registry-cache.policy.rules[0].keys", () -> keys.resolve("trusted.pub").toString())
        .set("registry-cache.policy.signatures.verdict-ttl", "10m")
        .set("registry-cache.policy.signatures.max-stale", "1h")
        .addTo(properties);
  }

  @BeforeAll
  static void keyPairs() {
    cosign = GoTools.require("cosign");
    cosign(List.of("generate-key-pair", "--output-key-prefix", "trusted"));
    cosign(List.of("generate-key-pair", "--output-key-prefix", "other"));
  }

  @AfterAll
  static void stop() throws IOException {
    registry.stop();
    TestFiles.deleteRecursively(storage);
    TestFiles.deleteRecursively(keys);
  }

  @BeforeEach
  void client() {
    cache = CacheClient.onPort(port);
  }

  static Command.Result cosign(List<String> arguments) {
    List<String> command = new ArrayList<>(List.of(cosign.toString()));
    command.addAll(arguments);
    return Command.run(LIMIT, keys, Map.of("COSIGN_PASSWORD", ""), command).assertSuccess();
  }

  /** Pushes a new small image to registry:2. */
  static Image push(String purpose) {
    return registry.pusher().push(TestImages.smallOci(TestImages.uniqueRepository(purpose), "v1"));
  }

  /** {@code cosign sign --key <key>.key} of the image's digest in registry:2. */
  static void sign(Image image, String key) {
    sign(image, key, false);
  }

  /**
   * {@code cosign sign --key <key>.key}, no transparency log: in the cosign tag scheme, or with
   * {@code bundle} as a Sigstore bundle among the image's referrers (cosign 3's default; the
   * referrers tag schema on registry:2).
   */
  static void sign(Image image, String key, boolean bundle) {
    List<String> arguments =
        new ArrayList<>(
            List.of(
                "sign",
                "--key",
                key + ".key",
                "--tlog-upload=false",
                "--use-signing-config=false",
                "--allow-insecure-registry",
                "-y"));
    if (!bundle) {
      arguments.add("--new-bundle-format=false");
    }
    arguments.add(
        registry.hostAndPort() + "/" + image.repository() + "@" + image.manifest().digest());
    cosign(arguments);
  }

  /** The image through the cache, as clients name it: {@code localhost:<port>/<host>/<repo>}. */
  String reference(Image image, boolean byDigest) {
    return "localhost:"
        + port
        + "/"
        + HOST
        + "/"
        + image.repository()
        + (byDigest ? "@" + image.manifest().digest() : ":" + image.tag());
  }

  Command.Result skopeoCopy(Image image, Path layout) {
    return Command.run(
        LIMIT,
        "skopeo",
        "--insecure-policy",
        "--command-timeout",
        "120s",
        "copy",
        "--src-tls-verify=false",
        "--src-no-creds",
        "docker://" + reference(image, false),
        "oci:" + layout + ":v1");
  }

  Command.Result crane(String... args) {
    List<String> command = new ArrayList<>(List.of(GoTools.require("crane").toString()));
    command.addAll(List.of(args));
    command.add("--insecure");
    return Command.run(LIMIT, command);
  }

  /** skopeo copied {@code image} whole: its manifest byte for byte, every blob its digest. */
  static void assertCopied(Path layout, Image image) throws IOException {
    assertThat(Files.readAllBytes(SkopeoIT.blobPath(layout, image.manifest().digest())))
        .isEqualTo(image.manifest().bytes());
    for (Blob blob : image.blobs()) {
      assertThat(Sha256.digest(SkopeoIT.blobPath(layout, blob.digest()))).isEqualTo(blob.digest());
    }
    SkopeoIT.assertEveryBlobMatchesItsName(layout);
  }

  /** Refused by the cache: the client failed and shows the cache's DENIED and reason. */
  static void assertRefused(Command.Result result, String reason) {
    assertThat(result.exitCode()).as(result.output()).isNotZero();
    assertThat(result.output())
        .as("the client shows the cache's reason")
        .containsIgnoringCase("denied")
        .contains("refused by the signature policy: " + reason);
  }

  void assertDenied(Image image, String reason) {
    for (boolean byDigest : new boolean[] {false, true}) {
      HttpResponse<byte[]> got =
          cache.getManifest(
              "/v2/"
                  + image.repository()
                  + "/manifests/"
                  + (byDigest ? image.manifest().digest() : image.tag()));
      assertThat(got.statusCode()).as(describe(got)).isEqualTo(403);
      String body = new String(got.body(), StandardCharsets.UTF_8);
      assertThat(JsonPath.<String>read(body, "$.errors[0].code")).isEqualTo("DENIED");
      assertThat(JsonPath.<String>read(body, "$.errors[0].message"))
          .contains("refused by the signature policy: " + reason);
    }
    // neither stored nor its layers fetched: the upstream saw no blob request
    registry.syncLogs();
    for (Blob blob : image.blobs()) {
      assertThat(
              registry.countRequests(
                  "GET", "/v2/" + image.repository() + "/blobs/" + blob.digest()))
          .as("GETs of a refused image's blob that reached registry:2")
          .isZero();
    }
  }

  @Test
  @NeedsTool("skopeo")
  void skopeoPullsTheImageSignedWithTheKeyAndIsRefusedTheOthers() throws Exception {
    Image good = push("signed/skopeo-good");
    sign(good, "trusted");
    Image unsigned = push("signed/skopeo-unsigned");
    Image otherKey = push("signed/skopeo-other");
    sign(otherKey, "other");
    Image tampered = push("signed/skopeo-tampered");
    sign(tampered, "trusted");
    tamper(tampered);

    Path layout = work.resolve("good");
    skopeoCopy(good, layout).assertSuccess();
    assertCopied(layout, good);

    assertRefused(skopeoCopy(unsigned, work.resolve("unsigned")), "no signature");
    assertRefused(skopeoCopy(otherKey, work.resolve("other")), "wrong key");
    assertRefused(skopeoCopy(tampered, work.resolve("tampered")), "wrong key");
    assertDenied(unsigned, "no signature");
    assertDenied(otherKey, "wrong key");
    assertDenied(tampered, "wrong key");
  }

  @Test
  @NeedsTool("skopeo")
  void skopeoPullsTheImageWithABundleByTheKeyAndIsRefusedOneByAnotherKey() throws IOException {
    Image good = push("signed/bundle-good");
    sign(good, "trusted", true);
    Image otherKey = push("signed/bundle-other");
    sign(otherKey, "other", true);

    Path layout = work.resolve("bundle-good");
    skopeoCopy(good, layout).assertSuccess();
    assertCopied(layout, good);

    assertRefused(skopeoCopy(otherKey, work.resolve("bundle-other")), "wrong key");
    assertDenied(otherKey, "wrong key");
  }

  @Test
  @NeedsGoTool("crane")
  void craneGetsTheSignedImageByTagAndDigestAndIsRefusedTheOthers() throws Exception {
    Image good = push("signed/crane-good");
    sign(good, "trusted");
    Image tampered = push("signed/crane-tampered");
    sign(tampered, "trusted");
    tamper(tampered);
    Image unsigned = push("signed/crane-unsigned");
    Image otherKey = push("signed/crane-other");
    sign(otherKey, "other");

    assertThat(crane("digest", reference(good, false)).assertSuccess().output().strip())
        .isEqualTo(good.manifest().digest());
    String manifest = crane("manifest", reference(good, true)).assertSuccess().output();
    assertThat(manifest).isEqualTo(good.manifest().text());
    Path pulled = work.resolve("crane-good");
    crane("pull", "--format", "oci", reference(good, false), pulled.toString()).assertSuccess();
    for (Blob blob : good.blobs()) {
      assertThat(Sha256.digest(SkopeoIT.blobPath(pulled, blob.digest()))).isEqualTo(blob.digest());
    }

    assertRefused(crane("manifest", reference(tampered, false)), "wrong key");
    assertRefused(crane("manifest", reference(tampered, true)), "wrong key");
    assertDenied(tampered, "wrong key");
    assertRefused(crane("manifest", reference(unsigned, false)), "no signature");
    assertRefused(crane("manifest", reference(otherKey, true)), "wrong key");
    assertDenied(unsigned, "no signature");
    assertDenied(otherKey, "wrong key");
  }

  @Test
  void ctrPullsTheSignedImageAndIsRefusedTheOthers() throws Exception {
    Containerd.require();
    Containerd containerd = new Containerd();
    try {
      Image good = push("signed/ctr-good");
      sign(good, "trusted");
      Image unsigned = push("signed/ctr-unsigned");
      Image otherKey = push("signed/ctr-other");
      sign(otherKey, "other");
      Image tampered = push("signed/ctr-tampered");
      sign(tampered, "trusted");
      tamper(tampered);
      Path hosts = work.resolve("hosts");
      Containerd.writeHostsToml(hosts, HOST, port);

      String ref = HOST + "/" + good.repository() + ":v1";
      Command.Result pull = containerd.pull(hosts, ref);
      assertThat(pull.exitCode()).as(pull.output()).isZero();
      Command.Result content = containerd.ctr("content", "get", good.manifest().digest());
      assertThat(content.output()).isEqualTo(good.manifest().text());
      assertThat(containerd.complete(ref)).as(containerd.ctr("images", "check").output()).isTrue();

      Command.Result refused = containerd.pull(hosts, HOST + "/" + unsigned.repository() + ":v1");
      assertThat(refused.exitCode()).as(refused.output()).isNotZero();
      assertThat(refused.output()).as(refused.output()).contains("403");
      assertDenied(unsigned, "no signature");
      for (Image refusedImage : new Image[] {otherKey, tampered}) {
        Command.Result other =
            containerd.pull(hosts, HOST + "/" + refusedImage.repository() + ":v1");
        assertThat(other.exitCode()).as(other.output()).isNotZero();
        assertThat(other.output()).as(other.output()).contains("403");
        assertDenied(refusedImage, "wrong key");
      }
    } finally {
      containerd.removePulled();
    }
  }

  @Test
  @NeedsTool("skopeo")
  void anImageVerifiedBeforeIsPulledWithTheUpstreamStoppedPastItsVerdictsTtl() throws Exception {
    Image image = push("signed/offline");
    sign(image, "trusted");
    skopeoCopy(image, work.resolve("before")).assertSuccess();

    registry.stopUpstream();
    try {
      clock.advance(Duration.ofMinutes(11)); // past verdict-ttl 10m, within max-stale 1h
      Path layout = work.resolve("stopped");
      skopeoCopy(image, layout).assertSuccess();
      assertCopied(layout, image);
      HttpResponse<byte[]> byDigest =
          cache.getManifest(
              "/v2/" + image.repository() + "/manifests/" + image.manifest().digest());
      assertThat(byDigest.statusCode()).as(describe(byDigest)).isEqualTo(200);
      assertThat(Sha256.digest(byDigest.body())).isEqualTo(image.manifest().digest());
    } finally {
      registry.startUpstream();
    }
  }

  /**
   * Changes one byte of the image's stored signature in registry:2: its signature manifest under
   * the cosign tag is pushed again with one bit of the signature annotation's last byte flipped.
   */
  static void tamper(Image image) throws Exception {
    Digest digest = Digest.parse(image.manifest().digest());
    String url =
        registry.baseUrl()
            + "/v2/"
            + image.repository()
            + "/manifests/sha256-"
            + digest.hex()
            + ".sig";
    try (HttpClient http = HttpClient.newHttpClient()) {
      HttpResponse<byte[]> got =
          http.send(
              HttpRequest.newBuilder(URI.create(url))
                  .header("Accept", "application/vnd.oci.image.manifest.v1+json")
                  .build(),
              HttpResponse.BodyHandlers.ofByteArray());
      assertThat(got.statusCode()).as("the signature cosign pushed").isEqualTo(200);
      ObjectNode root = (ObjectNode) Json.MAPPER.readTree(got.body());
      ObjectNode annotations = (ObjectNode) root.path("layers").get(0).path("annotations");
      String signature = annotations.path("dev.cosignproject.cosign/signature").asString();
      // the last byte of the DER signature (of its s): still well-formed, no longer valid
      byte[] bytes = Base64.getDecoder().decode(signature);
      bytes[bytes.length - 1] ^= 1;
      annotations.put(
          "dev.cosignproject.cosign/signature", Base64.getEncoder().encodeToString(bytes));
      HttpResponse<String> put =
          http.send(
              HttpRequest.newBuilder(URI.create(url))
                  .header("Content-Type", root.path("mediaType").asString())
                  .PUT(HttpRequest.BodyPublishers.ofByteArray(Json.MAPPER.writeValueAsBytes(root)))
                  .build(),
              HttpResponse.BodyHandlers.ofString());
      assertThat(put.statusCode()).as(put.body()).isEqualTo(201);
    }
  }
}
