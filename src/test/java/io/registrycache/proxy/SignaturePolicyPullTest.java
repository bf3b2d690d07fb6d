package io.registrycache.proxy;

import static io.registrycache.testsupport.CacheClient.describe;
import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import com.jayway.jsonpath.JsonPath;
import io.micrometer.core.instrument.MeterRegistry;
import io.registrycache.RegistryCacheApplication;
import io.registrycache.oci.Digest;
import io.registrycache.storage.ManifestStore;
import io.registrycache.testsupport.AdvancingClock;
import io.registrycache.testsupport.CacheClient;
import io.registrycache.testsupport.CacheProperties;
import io.registrycache.testsupport.ScriptedHttp;
import io.registrycache.testsupport.Sha256;
import io.registrycache.testsupport.TestFiles;
import io.registrycache.testsupport.TestImages;
import io.registrycache.testsupport.TestImages.Blob;
import io.registrycache.testsupport.TestImages.Image;
import io.registrycache.testsupport.TestImages.ImageIndex;
import io.registrycache.testsupport.TestImages.Manifest;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.security.GeneralSecurityException;
import java.security.KeyPair;
import java.security.KeyPairGenerator;
import java.security.Signature;
import java.security.spec.ECGenParameterSpec;
import java.time.Clock;
import java.time.Duration;
import java.util.Base64;
import java.util.function.BooleanSupplier;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.springframework.beans.factory.annotation.Autowired;
import org.springframework.boot.test.context.SpringBootTest;
import org.springframework.boot.test.context.TestConfiguration;
import org.springframework.boot.test.web.server.LocalServerPort;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Import;
import org.springframework.context.annotation.Primary;
import org.springframework.test.context.DynamicPropertyRegistry;
import org.springframework.test.context.DynamicPropertySource;

/**
 * The signature policy over real HTTP, the service as it runs, against a scripted upstream ({@link
 * ScriptedHttp}) holding cosign signatures under the cosign tag, made here with a P-256 key of this
 * run (cosign's own signing is in SignaturePolicyIT): repositories {@code it/signed/**} require a
 * signature by {@code trusted.pub}; everything else has no rule. The clock is moved, not waited on,
 * to pass a verdict's TTL (10m) and max-stale (1h).
 */
@SpringBootTest(
    classes = RegistryCacheApplication.class,
    webEnvironment = SpringBootTest.WebEnvironment.RANDOM_PORT)
@Import(SignaturePolicyPullTest.TestClock.class)
class SignaturePolicyPullTest {

  static final ScriptedHttp upstream = new ScriptedHttp();
  static final Path storage = TestFiles.tempDirectory("registry-cache-signatures-");
  static final Duration WAIT = Duration.ofSeconds(20);
  static final AdvancingClock clock = new AdvancingClock();
  static final KeyPair trusted = keyPair();
  static final KeyPair other = keyPair();
  static final Path trustedKey = pem(storage.resolve("trusted.pub"), trusted);

  @TestConfiguration(proxyBeanMethods = false)
  static class TestClock {
    @Bean
    @Primary
    Clock testClock() {
      return clock;
    }
  }

  @LocalServerPort int port;
  @Autowired MeterRegistry meters;
  @Autowired ManifestStore store;
  CacheClient cache;

  @DynamicPropertySource
  static void properties(DynamicPropertyRegistry registry) {
    CacheProperties.cache(storage)
        .localUpstream(upstream::baseUrl)
        .upstream("retry.max-attempts", "1")
        .upstream("circuit-breaker.enabled", "false")
        .set("registry-cache.policy.rules[0].repositories", "it/signed/**")
        .set("registry-cache.policy.rules[0].require", "signed")
        .set("registry-cache.policy.rules[0].keys", trustedKey.toString())
        .set("registry-cache.policy.signatures.verdict-ttl", "10m")
        .set("registry-cache.policy.signatures.max-stale", "1h")
        .addTo(registry);
  }

  @AfterAll
  static void stop() {
    upstream.close();
  }

  @BeforeEach
  void client() {
    cache = CacheClient.onPort(port);
  }

  static KeyPair keyPair() {
    try {
      KeyPairGenerator generator = KeyPairGenerator.getInstance("EC");
      generator.initialize(new ECGenParameterSpec("secp256r1"));
      return generator.generateKeyPair();
    } catch (GeneralSecurityException e) {
      throw new IllegalStateException(e);
    }
  }

  /** The public key as {@code cosign generate-key-pair} writes it: PEM {@code PUBLIC KEY}. */
  static Path pem(Path file, KeyPair key) {
    String pem =
        "-----BEGIN PUBLIC KEY-----\n"
            + Base64.getMimeEncoder(64, "\n".getBytes(StandardCharsets.US_ASCII))
                .encodeToString(key.getPublic().getEncoded())
            + "\n-----END PUBLIC KEY-----\n";
    try {
      return Files.writeString(file, pem);
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
  }

  /** A cosign signature: the simple-signing payload blob and its signature manifest. */
  record CosignSignature(Blob payload, Manifest manifest) {}

  /**
   * What {@code cosign sign --key} writes for {@code image} of {@code repository}: a payload naming
   * the digest, signed (ECDSA, SHA-256, DER) with {@code key}; {@code tamper} changes one byte of
   * the signature after signing.
   */
  static CosignSignature sign(String repository, String image, KeyPair key, boolean tamper) {
    byte[] payload =
        ("{\"critical\":{\"identity\":{\"docker-reference\":\"127.0.0.1/"
                + repository
                + "\"},\"image\":{\"docker-manifest-digest\":\""
                + image
                + "\"},\"type\":\"cosign container image signature\"},\"optional\":null}")
            .getBytes(StandardCharsets.UTF_8);
    byte[] signature;
    try {
      Signature signer = Signature.getInstance("SHA256withECDSA");
      signer.initSign(key.getPrivate());
      signer.update(payload);
      signature = signer.sign();
    } catch (GeneralSecurityException e) {
      throw new IllegalStateException(e);
    }
    if (tamper) {
      signature[signature.length - 1] ^= 1;
    }
    Blob blob = new Blob("application/vnd.dev.cosign.simplesigning.v1+json", payload);
    byte[] config = "{}".getBytes(StandardCharsets.UTF_8);
    String manifest =
        "{\"schemaVersion\":2,\"mediaType\":\"application/vnd.oci.image.manifest.v1+json\","
            + "\"config\":{\"mediaType\":\"application/vnd.oci.image.config.v1+json\",\"size\":"
            + config.length
            + ",\"digest\":\""
            + Sha256.digest(config)
            + "\"},\"layers\":[{\"mediaType\":\""
            + blob.mediaType()
            + "\",\"size\":"
            + blob.size()
            + ",\"digest\":\""
            + blob.digest()
            + "\",\"annotations\":{\"dev.cosignproject.cosign/signature\":\""
            + Base64.getEncoder().encodeToString(signature)
            + "\"}}]}";
    return new CosignSignature(
        blob,
        new Manifest(
            "application/vnd.oci.image.manifest.v1+json",
            manifest.getBytes(StandardCharsets.UTF_8)));
  }

  /** Puts {@code signature} under the cosign tag of {@code image}, as {@code cosign sign} does. */
  static void signatureAt(String repository, String image, CosignSignature signature) {
    Digest digest = Digest.parse(image);
    route("/v2/" + repository + "/manifests/sha256-" + digest.hex() + ".sig", signature.manifest());
    blob(repository, signature.payload());
  }

  static void serve(String repository, Image image) {
    route("/v2/" + repository + "/manifests/" + image.tag(), image.manifest());
    route("/v2/" + repository + "/manifests/" + image.manifest().digest(), image.manifest());
    for (Blob blob : image.blobs()) {
      blob(repository, blob);
    }
  }

  static void serve(ImageIndex index) {
    route("/v2/" + index.repository() + "/manifests/" + index.tag(), index.index());
    route("/v2/" + index.repository() + "/manifests/" + index.index().digest(), index.index());
    for (TestImages.PlatformImage p : index.platforms()) {
      serve(index.repository(), p.image());
    }
  }

  static void blob(String repository, Blob blob) {
    upstream.route(
        "/v2/" + repository + "/blobs/" + blob.digest(),
        ex -> ScriptedHttp.send(ex, 200, "application/octet-stream", blob.bytes(), blob.digest()));
  }

  static void route(String path, Manifest manifest) {
    upstream.route(
        path,
        ex ->
            ScriptedHttp.send(ex, 200, manifest.mediaType(), manifest.bytes(), manifest.digest()));
  }

  /** The upstream answers 503 for {@code image}'s manifest and signatures from now on. */
  static void down(String repository, Image image) {
    signaturesDown(repository, image);
    down(
        "/v2/" + repository + "/manifests/" + image.tag(),
        "/v2/" + repository + "/manifests/" + image.manifest().digest());
  }

  /** The upstream answers 503 for {@code image}'s signatures (tag and referrers) from now on. */
  static void signaturesDown(String repository, Image image) {
    down(
        "/v2/" + repository + "/manifests/" + sigTag(image.manifest().digest()),
        "/v2/" + repository + "/referrers/" + image.manifest().digest());
  }

  static void down(String... paths) {
    for (String path : paths) {
      upstream.route(
          path,
          ex ->
              ScriptedHttp.send(
                  ex,
                  503,
                  "application/json",
                  "{\"errors\":[{\"code\":\"UNAVAILABLE\",\"message\":\"down\"}]}"
                      .getBytes(StandardCharsets.UTF_8),
                  null));
    }
  }

  static String sigTag(String digest) {
    return "sha256-" + Digest.parse(digest).hex() + ".sig";
  }

  double verdicts(String verdict) {
    var c =
        meters
            .find("registry.cache.policy.verdicts")
            .tags("policy", "signature", "verdict", verdict)
            .counter();
    return c == null ? 0 : c.count();
  }

  static boolean throughout(BooleanSupplier condition) {
    await().during(Duration.ofMillis(300)).atMost(WAIT).until(condition::getAsBoolean);
    return true;
  }

  static void assertDenied(HttpResponse<byte[]> response, String reason) {
    assertThat(response.statusCode()).as(describe(response)).isEqualTo(403);
    String body = new String(response.body(), StandardCharsets.UTF_8);
    assertThat(JsonPath.<String>read(body, "$.errors[0].code")).isEqualTo("DENIED");
    assertThat(JsonPath.<String>read(body, "$.errors[0].message"))
        .contains("refused by the signature policy: " + reason + " (");
  }

  void assertNotStored(Manifest manifest) {
    assertThat(store.find(Digest.parse(manifest.digest()))).as("stored").isEmpty();
  }

  @Test
  void anImageSignedWithTheKeyIsServedByTagAndByDigest() {
    String repo = TestImages.uniqueRepository("signed/good");
    Image image = TestImages.smallOci(repo, "v1");
    serve(repo, image);
    signatureAt(
        repo, image.manifest().digest(), sign(repo, image.manifest().digest(), trusted, false));
    double allowed = verdicts("allowed");

    HttpResponse<byte[]> byTag = cache.getManifest("/v2/" + repo + "/manifests/v1");
    assertThat(byTag.statusCode()).as(describe(byTag)).isEqualTo(200);
    assertThat(byTag.body()).isEqualTo(image.manifest().bytes());
    HttpResponse<byte[]> byDigest =
        cache.getManifest("/v2/" + repo + "/manifests/" + image.manifest().digest());
    assertThat(byDigest.statusCode()).as(describe(byDigest)).isEqualTo(200);
    assertThat(Sha256.digest(byDigest.body())).isEqualTo(image.manifest().digest());
    assertThat(verdicts("allowed") - allowed).as("the fetch's and each request's").isEqualTo(3);
    // verified once: the verdict is remembered
    assertThat(
            upstream.count(
                "GET", "/v2/" + repo + "/manifests/" + sigTag(image.manifest().digest())))
        .isEqualTo(1);
    for (Blob blob : image.blobs()) {
      HttpResponse<byte[]> got = cache.get("/v2/" + repo + "/blobs/" + blob.digest());
      assertThat(got.statusCode()).as(describe(got)).isEqualTo(200);
    }
  }

  @Test
  void anUnsignedImageIsRefusedByTagAndByDigestNeitherStoredNorItsLayersFetched() {
    String repo = TestImages.uniqueRepository("signed/unsigned");
    Image image = TestImages.smallOci(repo, "v1");
    serve(repo, image);
    double denied = verdicts("denied");

    assertDenied(cache.getManifest("/v2/" + repo + "/manifests/v1"), "no signature");
    assertDenied(
        cache.getManifest("/v2/" + repo + "/manifests/" + image.manifest().digest()),
        "no signature");
    HttpResponse<byte[]> head =
        cache.headManifest("/v2/" + repo + "/manifests/" + image.manifest().digest());
    assertThat(head.statusCode()).as(describe(head)).isEqualTo(403);
    assertThat(verdicts("denied") - denied).isEqualTo(3);
    assertNotStored(image.manifest());
    assertThat(
            throughout(
                () ->
                    image.blobs().stream()
                        .allMatch(
                            b -> upstream.count("/v2/" + repo + "/blobs/" + b.digest()) == 0)))
        .isTrue();
  }

  @Test
  void anImageSignedWithAnotherKeyOrATamperedSignatureOrAnotherImagesSignatureIsRefused() {
    String repo = TestImages.uniqueRepository("signed/bad");
    Image otherKey = TestImages.smallOci(repo, "other-key");
    Image tampered = TestImages.smallOci(repo, "tampered");
    Image copied = TestImages.smallOci(repo, "copied");
    for (Image image : new Image[] {otherKey, tampered, copied}) {
      serve(repo, image);
    }
    signatureAt(
        repo, otherKey.manifest().digest(), sign(repo, otherKey.manifest().digest(), other, false));
    signatureAt(
        repo,
        tampered.manifest().digest(),
        sign(repo, tampered.manifest().digest(), trusted, true));
    // a good signature, of another image
    signatureAt(
        repo, copied.manifest().digest(), sign(repo, otherKey.manifest().digest(), trusted, false));

    assertDenied(cache.getManifest("/v2/" + repo + "/manifests/other-key"), "wrong key");
    assertDenied(cache.getManifest("/v2/" + repo + "/manifests/tampered"), "wrong key");
    assertDenied(cache.getManifest("/v2/" + repo + "/manifests/copied"), "bad signature");
    assertNotStored(otherKey.manifest());
    assertNotStored(tampered.manifest());
    assertNotStored(copied.manifest());
  }

  @Test
  void aChildOfASignedIndexIsServedAndAChildOfAnUnsignedIndexIsNot() {
    ImageIndex signed = TestImages.index(TestImages.uniqueRepository("signed/index"), "v1");
    serve(signed);
    signatureAt(
        signed.repository(),
        signed.index().digest(),
        sign(signed.repository(), signed.index().digest(), trusted, false));
    ImageIndex unsigned = TestImages.index(TestImages.uniqueRepository("signed/index-no"), "v1");
    serve(unsigned);

    HttpResponse<byte[]> top = cache.getManifest("/v2/" + signed.repository() + "/manifests/v1");
    assertThat(top.statusCode()).as(describe(top)).isEqualTo(200);
    assertThat(top.body()).isEqualTo(signed.index().bytes());
    Image child = signed.platform("arm64").image();
    HttpResponse<byte[]> got =
        cache.getManifest("/v2/" + signed.repository() + "/manifests/" + child.manifest().digest());
    assertThat(got.statusCode()).as(describe(got)).isEqualTo(200);
    assertThat(got.body()).isEqualTo(child.manifest().bytes());
    // allowed through the index, without a signature of its own
    assertThat(
            upstream.count(
                "GET",
                "/v2/" + signed.repository() + "/manifests/" + sigTag(child.manifest().digest())))
        .isZero();

    assertDenied(
        cache.getManifest("/v2/" + unsigned.repository() + "/manifests/v1"), "no signature");
    Image unsignedChild = unsigned.platform("arm64").image();
    assertDenied(
        cache.getManifest(
            "/v2/" + unsigned.repository() + "/manifests/" + unsignedChild.manifest().digest()),
        "no signature");
    assertNotStored(unsigned.index());
    assertNotStored(unsignedChild.manifest());
  }

  @Test
  void withTheUpstreamDownAVerifiedImageIsServedUpToMaxStaleAndANeverVerifiedOneNever() {
    String repo = TestImages.uniqueRepository("signed/offline");
    Image image = TestImages.smallOci(repo, "v1");
    serve(repo, image);
    signatureAt(
        repo, image.manifest().digest(), sign(repo, image.manifest().digest(), trusted, false));
    Image never = TestImages.smallOci(repo, "never");
    serve(repo, never);
    signatureAt(
        repo, never.manifest().digest(), sign(repo, never.manifest().digest(), trusted, false));
    assertThat(cache.getManifest("/v2/" + repo + "/manifests/v1").statusCode()).isEqualTo(200);

    down(repo, image);
    signaturesDown(repo, never); // its manifest is there, its signatures cannot be read
    clock.advance(Duration.ofMinutes(11)); // past the verdict's TTL (and the tag's)
    double stale = verdicts("stale");
    HttpResponse<byte[]> byTag = cache.getManifest("/v2/" + repo + "/manifests/v1");
    assertThat(byTag.statusCode()).as(describe(byTag)).isEqualTo(200);
    assertThat(byTag.body()).isEqualTo(image.manifest().bytes());
    HttpResponse<byte[]> byDigest =
        cache.getManifest("/v2/" + repo + "/manifests/" + image.manifest().digest());
    assertThat(byDigest.statusCode()).as(describe(byDigest)).isEqualTo(200);
    assertThat(verdicts("stale") - stale).isEqualTo(2);
    assertThat(
            upstream.count(
                "GET", "/v2/" + repo + "/manifests/" + sigTag(image.manifest().digest())))
        .as("asked again past the TTL")
        .isEqualTo(3);

    assertDenied(
        cache.getManifest("/v2/" + repo + "/manifests/" + never.manifest().digest()),
        "signature fetch failed");
    assertNotStored(never.manifest());

    clock.advance(Duration.ofHours(1)); // past max-stale
    assertDenied(
        cache.getManifest("/v2/" + repo + "/manifests/" + image.manifest().digest()),
        "signature fetch failed");
  }

  @Test
  void aStoredImageWhoseSignatureIsGoneUpstreamIsRefusedOnceItsVerdictIsPastItsTtl() {
    String repo = TestImages.uniqueRepository("signed/revoked");
    Image image = TestImages.smallOci(repo, "v1");
    serve(repo, image);
    signatureAt(
        repo, image.manifest().digest(), sign(repo, image.manifest().digest(), trusted, false));
    String byDigest = "/v2/" + repo + "/manifests/" + image.manifest().digest();
    assertThat(cache.getManifest(byDigest).statusCode()).isEqualTo(200);
    assertThat(store.find(Digest.parse(image.manifest().digest()))).isPresent();

    upstream.route(
        "/v2/" + repo + "/manifests/" + sigTag(image.manifest().digest()),
        ex ->
            ScriptedHttp.send(
                ex,
                404,
                "application/json",
                "{\"errors\":[{\"code\":\"MANIFEST_UNKNOWN\",\"message\":\"gone\"}]}"
                    .getBytes(StandardCharsets.UTF_8),
                null));
    assertThat(cache.getManifest(byDigest).statusCode())
        .as("within its verdict's TTL")
        .isEqualTo(200);
    clock.advance(Duration.ofMinutes(11));
    // stored, served from the store without the upstream's manifest: judged again all the same
    assertDenied(cache.getManifest(byDigest), "no signature");
    assertDenied(cache.getManifest("/v2/" + repo + "/manifests/v1"), "no signature");
  }

  /**
   * The upstream's referrers API lists {@code signatures} (cosign's artifact type) for the path.
   */
  static void referrers(String path, Manifest... signatures) {
    StringBuilder manifests = new StringBuilder();
    for (Manifest m : signatures) {
      manifests
          .append(manifests.isEmpty() ? "" : ",")
          .append("{\"mediaType\":\"")
          .append(m.mediaType())
          .append("\",\"size\":")
          .append(m.bytes().length)
          .append(",\"digest\":\"")
          .append(m.digest())
          .append("\",\"artifactType\":\"application/vnd.dev.cosign.artifact.sig.v1+json\"}");
    }
    byte[] index =
        ("{\"schemaVersion\":2,\"mediaType\":\"application/vnd.oci.image.index.v1+json\","
                + "\"manifests\":["
                + manifests
                + "]}")
            .getBytes(StandardCharsets.UTF_8);
    upstream.route(
        path,
        ex ->
            ScriptedHttp.send(
                ex, 200, "application/vnd.oci.image.index.v1+json", index, Sha256.digest(index)));
  }

  @Test
  void aSignatureAddedToTheReferrersIsJudgedAtTheListsRefreshWithinTheVerdictsTtl() {
    String repo = TestImages.uniqueRepository("signed/referrers");
    Image image = TestImages.smallOci(repo, "v1");
    serve(repo, image);
    String listPath = "/v2/" + repo + "/referrers/" + image.manifest().digest();
    referrers(listPath);
    assertDenied(cache.getManifest("/v2/" + repo + "/manifests/v1"), "no signature");
    HttpResponse<byte[]> empty = cache.get(listPath);
    assertThat(empty.statusCode()).as(describe(empty)).isEqualTo(200);
    assertThat(
            JsonPath.<java.util.List<?>>read(
                new String(empty.body(), StandardCharsets.UTF_8), "$.manifests"))
        .isEmpty();

    CosignSignature signature = sign(repo, image.manifest().digest(), trusted, false);
    route("/v2/" + repo + "/manifests/" + signature.manifest().digest(), signature.manifest());
    blob(repo, signature.payload());
    referrers(listPath, signature.manifest());
    assertDenied(
        cache.getManifest("/v2/" + repo + "/manifests/v1"),
        "no signature"); // the verdict stands: nothing told the cache yet

    clock.advance(Duration.ofMinutes(2)); // past referrers.ttl (60s), within verdict-ttl (10m)
    HttpResponse<byte[]> listed = cache.get(listPath);
    assertThat(listed.statusCode()).as(describe(listed)).isEqualTo(200);
    assertThat(
            JsonPath.<String>read(
                new String(listed.body(), StandardCharsets.UTF_8), "$.manifests[0].digest"))
        .isEqualTo(signature.manifest().digest());
    HttpResponse<byte[]> got = cache.getManifest("/v2/" + repo + "/manifests/v1");
    assertThat(got.statusCode()).as(describe(got)).isEqualTo(200);
    assertThat(got.body()).isEqualTo(image.manifest().bytes());
  }

  @Test
  void aRepositoryNoRuleMatchesServesUnsignedImages() {
    String repo = TestImages.uniqueRepository("open");
    Image image = TestImages.smallOci(repo, "v1");
    serve(repo, image);

    HttpResponse<byte[]> got = cache.getManifest("/v2/" + repo + "/manifests/v1");
    assertThat(got.statusCode()).as(describe(got)).isEqualTo(200);
    assertThat(
            upstream.count(
                "GET", "/v2/" + repo + "/manifests/" + sigTag(image.manifest().digest())))
        .isZero();
  }
}
