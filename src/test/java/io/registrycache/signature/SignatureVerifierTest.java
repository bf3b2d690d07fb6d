package io.registrycache.signature;

import static org.assertj.core.api.Assertions.assertThat;

import io.registrycache.oci.Digest;
import io.registrycache.oci.Json;
import io.registrycache.oci.OciErrorCode;
import io.registrycache.oci.OciException;
import io.registrycache.oci.RepositoryName;
import io.registrycache.signature.SignatureVerdict.Reason;
import io.registrycache.signature.SignatureVerdict.Refused;
import io.registrycache.signature.SignatureVerdict.Verified;
import io.registrycache.testsupport.TestUpstreams;
import io.registrycache.upstream.Upstream;
import java.io.IOException;
import java.io.InputStream;
import java.io.UncheckedIOException;
import java.net.URISyntaxException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.time.Duration;
import java.util.Arrays;
import java.util.Base64;
import java.util.List;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;
import org.springframework.http.HttpStatus;
import tools.jackson.databind.node.ObjectNode;

/**
 * {@link SignatureVerifier} on real cosign signatures (src/test/resources/.../signature/cosign,
 * made by its make-fixtures.sh with cosign 2.4.3) served by an {@link InMemoryUpstream}: each key
 * type verifies its own signatures, and every way a signature can fail to hold for an image is
 * refused with its reason.
 */
class SignatureVerifierTest {

  static final Upstream UPSTREAM = TestUpstreams.upstream("signed", "http://127.0.0.1:9", s -> {});
  static final RepositoryName NAME = RepositoryName.parse("fixtures/image");
  static final Duration WAIT = Duration.ofSeconds(10);

  /** One signed image of the fixtures: its digest, signature manifest and payload blob. */
  record Fixture(Digest image, byte[] signatureManifest, byte[] payload) {

    static Fixture load(String name) {
      return new Fixture(
          Digest.parse(new String(resource(name + "/image-digest"), StandardCharsets.UTF_8).trim()),
          resource(name + "/signature-manifest.json"),
          resource(name + "/payload.json"));
    }

    Digest payloadDigest() {
      return Digest.parse(layer(signatureManifest).path("digest").asString());
    }

    Digest signatureManifestDigest() {
      return Digest.sha256(signatureManifest);
    }

    /**
     * An upstream holding this image's signature under the cosign tag, as cosign sign leaves it.
     */
    InMemoryUpstream upstream() {
      return new InMemoryUpstream()
          .manifest(signatureTag(image), signatureManifest)
          .blob(payloadDigest(), payload);
    }
  }

  static final Fixture ECDSA = Fixture.load("ecdsa");
  static final Fixture RSA = Fixture.load("rsa");
  static final Fixture REFERRER = Fixture.load("referrer");

  static byte[] resource(String path) {
    try (InputStream in = SignatureVerifierTest.class.getResourceAsStream("cosign/" + path)) {
      if (in == null) {
        throw new IllegalStateException("no fixture cosign/" + path);
      }
      return in.readAllBytes();
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
  }

  static Path key(String name) {
    try {
      return Path.of(SignatureVerifierTest.class.getResource("cosign/" + name + ".pub").toURI());
    } catch (URISyntaxException e) {
      throw new IllegalStateException(e);
    }
  }

  static String signatureTag(Digest image) {
    return image.algorithm() + "-" + image.hex() + ".sig";
  }

  static ObjectNode layer(byte[] manifest) {
    return (ObjectNode) Json.MAPPER.readTree(manifest).path("layers").get(0);
  }

  static SignatureVerdict verify(InMemoryUpstream upstream, Digest image, String... keys) {
    List<Path> files = Arrays.stream(keys).map(SignatureVerifierTest::key).toList();
    return new SignatureVerifier(upstream, files).verify(UPSTREAM, NAME, image).block(WAIT);
  }

  static Refused refused(SignatureVerdict verdict, Reason reason) {
    assertThat(verdict).isInstanceOf(Refused.class);
    Refused refused = (Refused) verdict;
    assertThat(refused.reason()).as(refused.detail()).isEqualTo(reason);
    return refused;
  }

  @ParameterizedTest
  @ValueSource(strings = {"ecdsa", "rsa", "ed25519"})
  void aSignatureVerifiesWithTheKeyThatMadeIt(String type) {
    Fixture signed = Fixture.load(type);

    assertThat(verify(signed.upstream(), signed.image(), type))
        .isEqualTo(new Verified(type + ".pub", signed.signatureManifestDigest()));
  }

  @Test
  void everyKeyOfTheSetIsTried() {
    assertThat(verify(RSA.upstream(), RSA.image(), "other", "ecdsa", "ed25519", "rsa"))
        .isEqualTo(new Verified("rsa.pub", RSA.signatureManifestDigest()));
  }

  @ParameterizedTest
  @ValueSource(strings = {"ecdsa", "rsa", "ed25519"})
  void aSignatureByAnotherKeyIsTheWrongKey(String type) {
    Fixture signed = Fixture.load(type);
    String[] others =
        type.equals("ecdsa") ? new String[] {"other", "rsa"} : new String[] {"other", "ecdsa"};

    Refused refused = refused(verify(signed.upstream(), signed.image(), others), Reason.WRONG_KEY);
    assertThat(refused.detail()).contains("none of the keys [other.pub, ");
  }

  @Test
  void aPayloadChangedByOneByteDoesNotHaveItsDigest() {
    byte[] changed = ECDSA.payload().clone();
    changed[changed.length / 2] ^= 1;
    InMemoryUpstream upstream = ECDSA.upstream().blob(ECDSA.payloadDigest(), changed);

    Refused refused = refused(verify(upstream, ECDSA.image(), "ecdsa"), Reason.BAD_SIGNATURE);
    assertThat(refused.detail()).contains(ECDSA.payloadDigest() + ": the bytes do not have");
  }

  /**
   * The payload changed and the signature manifest's descriptor changed with it: the payload still
   * names the image, so only the signature check refuses it.
   */
  @Test
  void aPayloadChangedWithItsDescriptorFailsTheSignatureCheck() {
    String text = new String(ECDSA.payload(), StandardCharsets.UTF_8);
    assertThat(text).contains("\"docker-reference\":\"").contains(ECDSA.image().toString());
    byte[] changed =
        text.replace("\"docker-reference\":\"", "\"docker-reference\":\"x")
            .getBytes(StandardCharsets.UTF_8);
    ObjectNode manifest = (ObjectNode) Json.MAPPER.readTree(ECDSA.signatureManifest());
    ObjectNode layer = (ObjectNode) manifest.path("layers").get(0);
    layer.put("digest", Digest.sha256(changed).toString());
    layer.put("size", changed.length);
    InMemoryUpstream upstream =
        new InMemoryUpstream()
            .manifest(signatureTag(ECDSA.image()), Json.MAPPER.writeValueAsBytes(manifest))
            .blob(Digest.sha256(changed), changed);

    refused(verify(upstream, ECDSA.image(), "ecdsa"), Reason.WRONG_KEY);
  }

  @Test
  void aSignatureChangedByOneByteFailsTheSignatureCheck() {
    ObjectNode manifest = (ObjectNode) Json.MAPPER.readTree(ECDSA.signatureManifest());
    ObjectNode annotations = (ObjectNode) manifest.path("layers").get(0).path("annotations");
    byte[] signature =
        Base64.getDecoder()
            .decode(annotations.path(SignatureVerifier.SIGNATURE_ANNOTATION).asString());
    signature[signature.length - 1] ^= 1;
    annotations.put(
        SignatureVerifier.SIGNATURE_ANNOTATION, Base64.getEncoder().encodeToString(signature));
    InMemoryUpstream upstream =
        ECDSA
            .upstream()
            .manifest(signatureTag(ECDSA.image()), Json.MAPPER.writeValueAsBytes(manifest));

    refused(verify(upstream, ECDSA.image(), "ecdsa"), Reason.WRONG_KEY);
  }

  /** A good signature of one image, put under another image's signature tag. */
  @Test
  void aSignatureOfAnotherImageIsABadSignature() {
    InMemoryUpstream upstream =
        new InMemoryUpstream()
            .manifest(signatureTag(RSA.image()), ECDSA.signatureManifest())
            .blob(ECDSA.payloadDigest(), ECDSA.payload());

    Refused refused = refused(verify(upstream, RSA.image(), "ecdsa"), Reason.BAD_SIGNATURE);
    assertThat(refused.detail()).contains("signs image " + ECDSA.image() + ", not " + RSA.image());
  }

  @Test
  void anImageWithoutSignaturesHasNoSignature() {
    InMemoryUpstream upstream = ECDSA.upstream(); // ECDSA's image is signed, RSA's is not here

    Refused refused = refused(verify(upstream, RSA.image(), "ecdsa"), Reason.NO_SIGNATURE);
    assertThat(refused.detail()).contains(signatureTag(RSA.image()));
  }

  @Test
  void aPayloadTheUpstreamFailsToSendIsAFetchFailure() {
    InMemoryUpstream upstream = ECDSA.upstream().failing(ECDSA.payloadDigest().toString());

    Refused refused = refused(verify(upstream, ECDSA.image(), "ecdsa"), Reason.FETCH_FAILED);
    assertThat(refused.detail()).contains("upstream answered 500");
  }

  @Test
  void aSignatureTagTheUpstreamFailsToSendIsAFetchFailure() {
    InMemoryUpstream upstream = ECDSA.upstream().failing(signatureTag(ECDSA.image()));

    refused(verify(upstream, ECDSA.image(), "ecdsa"), Reason.FETCH_FAILED);
  }

  @Test
  void oneVerifiedSignatureIsEnoughWhenTheReferrersFail() {
    InMemoryUpstream upstream = ECDSA.upstream().failing("referrers");

    assertThat(verify(upstream, ECDSA.image(), "ecdsa")).isInstanceOf(Verified.class);
  }

  @Test
  void aSignatureAmongTheReferrersVerifies() {
    Digest signature = Digest.parse(referrerDescriptor().path("digest").asString());
    assertThat(signature).isEqualTo(REFERRER.signatureManifestDigest());
    InMemoryUpstream upstream =
        new InMemoryUpstream()
            .referrers(resource("referrer/referrers-index.json"))
            .manifest(signature.toString(), REFERRER.signatureManifest())
            .blob(REFERRER.payloadDigest(), REFERRER.payload());

    assertThat(verify(upstream, REFERRER.image(), "ecdsa"))
        .isEqualTo(new Verified("ecdsa.pub", signature));
  }

  @Test
  void withoutTheReferrersApiTheReferrersTagSchemaIsRead() {
    Digest signature = REFERRER.signatureManifestDigest();
    InMemoryUpstream upstream =
        new InMemoryUpstream()
            .manifest(
                REFERRER.image().algorithm() + "-" + REFERRER.image().hex(),
                resource("referrer/referrers-index.json"))
            .manifest(signature.toString(), REFERRER.signatureManifest())
            .blob(REFERRER.payloadDigest(), REFERRER.payload());

    assertThat(verify(upstream, REFERRER.image(), "ecdsa"))
        .isEqualTo(new Verified("ecdsa.pub", signature));
  }

  @Test
  void aReferrerWhoseBytesDoNotHaveItsDigestIsABadSignature() {
    Digest signature = REFERRER.signatureManifestDigest();
    byte[] other =
        (new String(REFERRER.signatureManifest(), StandardCharsets.UTF_8) + " ")
            .getBytes(StandardCharsets.UTF_8);
    InMemoryUpstream upstream =
        new InMemoryUpstream()
            .referrers(resource("referrer/referrers-index.json"))
            .manifest(signature.toString(), other)
            .blob(REFERRER.payloadDigest(), REFERRER.payload());

    Refused refused = refused(verify(upstream, REFERRER.image(), "ecdsa"), Reason.BAD_SIGNATURE);
    assertThat(refused.detail()).contains("another digest");
  }

  @Test
  void aRefusalIsADeniedErrorNamingTheReason() {
    Refused refused =
        refused(verify(new InMemoryUpstream(), ECDSA.image(), "ecdsa"), Reason.NO_SIGNATURE);

    OciException denied = refused.denied("fixtures/image@" + ECDSA.image());
    assertThat(denied.code()).isEqualTo(OciErrorCode.DENIED);
    assertThat(denied.status()).isEqualTo(HttpStatus.FORBIDDEN);
    assertThat(denied.getMessage())
        .startsWith(
            "fixtures/image@" + ECDSA.image() + " refused by the signature policy: no signature (");
  }

  /** cosign 3's signature of the {@code bundle} fixture: a Sigstore bundle among the referrers. */
  record BundleFixture(Digest image, byte[] index, byte[] signatureManifest, byte[] bundle) {

    static BundleFixture load() {
      return new BundleFixture(
          Digest.parse(new String(resource("bundle/image-digest"), StandardCharsets.UTF_8).trim()),
          resource("bundle/referrers-index.json"),
          resource("bundle/signature-manifest.json"),
          resource("bundle/bundle.json"));
    }

    /** An upstream with the referrers API listing the bundle, as cosign 3 leaves it. */
    InMemoryUpstream upstream() {
      return new InMemoryUpstream()
          .referrers(index)
          .manifest(Digest.sha256(signatureManifest).toString(), signatureManifest)
          .blob(Digest.parse(layer(signatureManifest).path("digest").asString()), bundle);
    }
  }

  static final BundleFixture BUNDLE = BundleFixture.load();

  @Test
  void aCosign3BundleVerifiesWithTheKeyThatMadeIt() {
    assertThat(layer(BUNDLE.signatureManifest()).path("mediaType").asString())
        .startsWith(SignatureVerifier.BUNDLE_PREFIX);

    assertThat(verify(BUNDLE.upstream(), BUNDLE.image(), "other", "ecdsa"))
        .isEqualTo(new Verified("ecdsa.pub", Digest.sha256(BUNDLE.signatureManifest())));
    refused(verify(BUNDLE.upstream(), BUNDLE.image(), "other", "rsa"), Reason.WRONG_KEY);
  }

  /** The bundle listed as a referrer of another image: it verifies, but names its own image. */
  @Test
  void aCosign3BundleOfAnotherImageIsABadSignature() {
    Refused refused =
        refused(verify(BUNDLE.upstream(), ECDSA.image(), "ecdsa"), Reason.BAD_SIGNATURE);
    assertThat(refused.detail()).contains("signs [" + BUNDLE.image() + "], not " + ECDSA.image());
  }

  /** The statement changed inside the bundle, the manifest's descriptor with it. */
  @Test
  void aCosign3BundleWithAChangedStatementFailsTheSignatureCheck() {
    ObjectNode bundle = (ObjectNode) Json.MAPPER.readTree(BUNDLE.bundle());
    ObjectNode envelope = (ObjectNode) bundle.path("dsseEnvelope");
    ObjectNode statement =
        (ObjectNode)
            Json.MAPPER.readTree(Base64.getDecoder().decode(envelope.path("payload").asString()));
    assertThat(statement.toString()).contains(BUNDLE.image().hex());
    statement.put("added", 1); // still a statement naming the image
    envelope.put(
        "payload", Base64.getEncoder().encodeToString(Json.MAPPER.writeValueAsBytes(statement)));
    byte[] changed = Json.MAPPER.writeValueAsBytes(bundle);
    ObjectNode manifest = (ObjectNode) Json.MAPPER.readTree(BUNDLE.signatureManifest());
    ObjectNode layer = (ObjectNode) manifest.path("layers").get(0);
    layer.put("digest", Digest.sha256(changed).toString());
    layer.put("size", changed.length);
    byte[] manifestBytes = Json.MAPPER.writeValueAsBytes(manifest);
    ObjectNode index = (ObjectNode) Json.MAPPER.readTree(BUNDLE.index());
    ObjectNode descriptor = (ObjectNode) index.path("manifests").get(0);
    descriptor.put("digest", Digest.sha256(manifestBytes).toString());
    descriptor.put("size", manifestBytes.length);
    InMemoryUpstream upstream =
        new InMemoryUpstream()
            .referrers(Json.MAPPER.writeValueAsBytes(index))
            .manifest(Digest.sha256(manifestBytes).toString(), manifestBytes)
            .blob(Digest.sha256(changed), changed);

    refused(verify(upstream, BUNDLE.image(), "ecdsa"), Reason.WRONG_KEY);
  }

  @Test
  void thePreAuthenticationEncodingIsDsseV1() {
    // the example of the DSSE v1 protocol description
    assertThat(
            new String(
                SignatureVerifier.preAuthenticationEncoding(
                    "http://example.com/HelloWorld",
                    "hello world".getBytes(StandardCharsets.UTF_8)),
                StandardCharsets.UTF_8))
        .isEqualTo("DSSEv1 29 http://example.com/HelloWorld 11 hello world");
  }

  static ObjectNode referrerDescriptor() {
    return (ObjectNode)
        Json.MAPPER.readTree(resource("referrer/referrers-index.json")).path("manifests").get(0);
  }
}
