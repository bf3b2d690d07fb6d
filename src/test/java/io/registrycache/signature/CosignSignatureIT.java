package io.registrycache.signature;

import static org.assertj.core.api.Assertions.assertThat;

import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import io.registrycache.oci.Digest;
import io.registrycache.oci.RepositoryName;
import io.registrycache.signature.SignatureVerdict.Reason;
import io.registrycache.signature.SignatureVerdict.Refused;
import io.registrycache.signature.SignatureVerdict.Verified;
import io.registrycache.testsupport.Command;
import io.registrycache.testsupport.GoTools;
import io.registrycache.testsupport.NeedsGoTool;
import io.registrycache.testsupport.TestImages;
import io.registrycache.testsupport.TestImages.Image;
import io.registrycache.testsupport.TestUpstreams;
import io.registrycache.testsupport.UpstreamRegistryContainer;
import io.registrycache.upstream.ReactorNettyUpstreamClient;
import io.registrycache.upstream.Upstream;
import io.registrycache.upstream.UpstreamResilience;
import java.io.IOException;
import java.io.StringWriter;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.file.Files;
import java.nio.file.Path;
import java.security.KeyPairGenerator;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import org.bouncycastle.openssl.jcajce.JcaPEMWriter;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/**
 * {@link SignatureVerifier} through the cache's own upstream client against a real {@code
 * registry:2}, on images signed there by the real cosign ({@code .ci/go-tools.sh cosign}) with key
 * pairs it made or imported: ECDSA P-256 ({@code cosign generate-key-pair}), RSA 2048 and Ed25519
 * ({@code cosign import-key-pair}). Signatures in the cosign tag scheme (cosign's default) and,
 * with {@code --registry-referrers-mode=oci-1-1}, in the referrers tag schema (registry:2 has no
 * referrers API); and Sigstore bundles, cosign 3's default, in the referrers tag schema too.
 */
@NeedsGoTool("cosign")
class CosignSignatureIT {

  static final Duration COSIGN_TIMEOUT = Duration.ofMinutes(2);
  static final Duration WAIT = Duration.ofSeconds(30);

  @TempDir static Path keys;

  static Path cosign;
  static UpstreamRegistryContainer registry;
  static ReactorNettyUpstreamClient client;
  static Upstream upstream;

  @BeforeAll
  static void start() throws Exception {
    cosign = GoTools.require("cosign");
    System.out.println(cosign(List.of("version")).output());
    registry = UpstreamRegistryContainer.started();
    SimpleMeterRegistry meters = new SimpleMeterRegistry();
    client = new ReactorNettyUpstreamClient(null, meters, new UpstreamResilience(null, meters));
    upstream = TestUpstreams.upstream("signed", registry.baseUrl(), s -> {});
    cosign(List.of("generate-key-pair", "--output-key-prefix", "ecdsa"));
    cosign(List.of("generate-key-pair", "--output-key-prefix", "other"));
    importKey("rsa", "RSA", 2048);
    importKey("ed25519", "Ed25519", 0);
  }

  @AfterAll
  static void stop() {
    if (client != null) {
      client.destroy();
    }
    if (registry != null) {
      registry.stop();
    }
  }

  /** A private key made by the JDK, imported by cosign as {@code <prefix>.key} and {@code .pub}. */
  static void importKey(String prefix, String algorithm, int bits) throws Exception {
    KeyPairGenerator generator = KeyPairGenerator.getInstance(algorithm);
    if (bits > 0) {
      generator.initialize(bits);
    }
    StringWriter pem = new StringWriter();
    try (JcaPEMWriter writer = new JcaPEMWriter(pem)) {
      writer.writeObject(generator.generateKeyPair().getPrivate());
    }
    Path file = Files.writeString(keys.resolve(prefix + ".pem"), pem.toString());
    cosign(List.of("import-key-pair", "--key", file.toString(), "--output-key-prefix", prefix));
  }

  /**
   * Runs cosign in the keys' folder with an empty key password; fails the test unless it exits 0.
   */
  static Command.Result cosign(List<String> arguments) {
    List<String> command = new ArrayList<>(List.of(cosign.toString()));
    command.addAll(arguments);
    return Command.run(COSIGN_TIMEOUT, keys, Map.of("COSIGN_PASSWORD", ""), command)
        .assertSuccess();
  }

  /** Pushes a new small image; returns its repository and manifest digest. */
  static Image push(String purpose) {
    return registry.pusher().push(TestImages.smallOci(TestImages.uniqueRepository(purpose), "v1"));
  }

  static String reference(Image image) {
    return registry.hostAndPort() + "/" + image.repository() + "@" + image.manifest().digest();
  }

  /**
   * {@code cosign sign} with the key pair {@code key}, no transparency log, in the cosign tag
   * scheme ({@code --new-bundle-format=false}; cosign 3's default is a Sigstore bundle: {@link
   * #signBundle}).
   */
  static void sign(Image image, String key, String... flags) {
    List<String> arguments = new ArrayList<>(SIGN_WITHOUT_LOG);
    arguments.addAll(List.of("--key", key + ".key", "--new-bundle-format=false"));
    arguments.addAll(List.of(flags));
    arguments.add(reference(image));
    System.out.println(cosign(arguments).output());
  }

  /**
   * {@code cosign sign --key <key>.key} as cosign 3 signs by default: a Sigstore bundle (a DSSE
   * envelope over an in-toto statement naming the digest) as a referrer of the image, in the
   * referrers tag schema on registry:2.
   */
  static void signBundle(Image image, String key) {
    List<String> arguments = new ArrayList<>(SIGN_WITHOUT_LOG);
    arguments.addAll(List.of("--key", key + ".key", reference(image)));
    System.out.println(cosign(arguments).output());
  }

  /**
   * {@code cosign sign} without a transparency log: cosign 3 takes {@code --tlog-upload=false} only
   * without its TUF-provided signing config.
   */
  static final List<String> SIGN_WITHOUT_LOG =
      List.of(
          "sign",
          "--tlog-upload=false",
          "--use-signing-config=false",
          "--allow-insecure-registry",
          "-y");

  static SignatureVerdict verify(Image image, String... keyNames) {
    List<Path> files = new ArrayList<>();
    for (String name : keyNames) {
      files.add(keys.resolve(name + ".pub"));
    }
    return new SignatureVerifier(client, files)
        .verify(
            upstream,
            RepositoryName.parse(image.repository()),
            Digest.parse(image.manifest().digest()))
        .block(WAIT);
  }

  static Reason reason(SignatureVerdict verdict) {
    assertThat(verdict).isInstanceOf(Refused.class);
    return ((Refused) verdict).reason();
  }

  @Test
  void anImageSignedWithAKeyVerifiesWithThatKeyOnly() {
    Image image = push("signed");
    sign(image, "ecdsa");

    SignatureVerdict right = verify(image, "ecdsa");
    assertThat(right).isInstanceOf(Verified.class);
    assertThat(((Verified) right).key()).isEqualTo("ecdsa.pub");
    assertThat(verify(image, "other", "ecdsa")).isEqualTo(right);
    assertThat(reason(verify(image, "other"))).isEqualTo(Reason.WRONG_KEY);
  }

  @Test
  void anUnsignedImageHasNoSignature() {
    Image signed = push("signed-beside");
    sign(signed, "ecdsa");
    Image unsigned = push("unsigned");

    SignatureVerdict verdict = verify(unsigned, "ecdsa");
    assertThat(reason(verdict)).as(verdict.toString()).isEqualTo(Reason.NO_SIGNATURE);
  }

  @ParameterizedTest
  @ValueSource(strings = {"rsa", "ed25519"})
  void importedKeysOfOtherTypesVerify(String key) {
    Image image = push("signed-" + key);
    sign(image, key);

    assertThat(verify(image, "ecdsa", key))
        .isInstanceOf(Verified.class)
        .extracting(v -> ((Verified) v).key())
        .isEqualTo(key + ".pub");
    assertThat(reason(verify(image, "ecdsa", "other"))).isEqualTo(Reason.WRONG_KEY);
  }

  @Test
  void aSignatureInTheReferrersVerifies() throws IOException {
    Image image = push("signed-referrer");
    cosignExperimental(image);

    Digest digest = Digest.parse(image.manifest().digest());
    String manifests = registry.baseUrl() + "/v2/" + image.repository() + "/manifests/";
    // not under the cosign tag: only the referrers tag schema's index (registry:2) names it
    assertThat(status(manifests + digest.algorithm() + "-" + digest.hex() + ".sig")).isEqualTo(404);
    assertThat(status(manifests + digest.algorithm() + "-" + digest.hex())).isEqualTo(200);
    assertThat(verify(image, "ecdsa")).isInstanceOf(Verified.class);
    assertThat(reason(verify(image, "other"))).isEqualTo(Reason.WRONG_KEY);
  }

  @Test
  void aSigstoreBundleInTheReferrersVerifies() throws IOException {
    Image image = push("signed-bundle");
    signBundle(image, "ecdsa");

    Digest digest = Digest.parse(image.manifest().digest());
    String manifests = registry.baseUrl() + "/v2/" + image.repository() + "/manifests/";
    assertThat(status(manifests + digest.algorithm() + "-" + digest.hex() + ".sig")).isEqualTo(404);
    assertThat(status(manifests + digest.algorithm() + "-" + digest.hex())).isEqualTo(200);
    assertThat(verify(image, "other", "ecdsa"))
        .isInstanceOf(Verified.class)
        .extracting(v -> ((Verified) v).key())
        .isEqualTo("ecdsa.pub");
    assertThat(reason(verify(image, "other"))).isEqualTo(Reason.WRONG_KEY);
  }

  static int status(String url) throws IOException {
    try (HttpClient http = HttpClient.newHttpClient()) {
      return http.send(
              HttpRequest.newBuilder(URI.create(url))
                  .method("HEAD", HttpRequest.BodyPublishers.noBody())
                  .header(
                      "Accept",
                      "application/vnd.oci.image.manifest.v1+json, "
                          + "application/vnd.oci.image.index.v1+json")
                  .build(),
              HttpResponse.BodyHandlers.discarding())
          .statusCode();
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new IOException(e);
    }
  }

  static void cosignExperimental(Image image) {
    List<String> command =
        new ArrayList<>(
            List.of(
                cosign.toString(),
                "sign",
                "--key",
                "ecdsa.key",
                "--tlog-upload=false",
                "--use-signing-config=false",
                "--new-bundle-format=false",
                "--allow-insecure-registry",
                "-y",
                "--registry-referrers-mode=oci-1-1",
                reference(image)));
    System.out.println(
        Command.run(
                COSIGN_TIMEOUT,
                keys,
                Map.of("COSIGN_PASSWORD", "", "COSIGN_EXPERIMENTAL", "1"),
                command)
            .assertSuccess()
            .output());
  }
}
