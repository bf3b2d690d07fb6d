package io.registrycache.signature;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.assertj.core.groups.Tuple.tuple;

import java.io.IOException;
import java.io.StringWriter;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.security.GeneralSecurityException;
import java.security.KeyPair;
import java.security.KeyPairGenerator;
import java.security.Signature;
import java.security.spec.ECGenParameterSpec;
import java.security.spec.EdDSAParameterSpec;
import java.util.List;
import org.bouncycastle.openssl.jcajce.JcaPEMWriter;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * {@link SigningKeys} reads cosign's public keys (the fixtures cosign wrote) and refuses, naming
 * the file and why, what is not an accepted public key.
 */
class SigningKeysTest {

  @TempDir Path dir;

  @Test
  void readsCosignPublicKeysOfEachType() {
    SigningKeys keys =
        SigningKeys.load(
            List.of(
                SignatureVerifierTest.key("ecdsa"),
                SignatureVerifierTest.key("rsa"),
                SignatureVerifierTest.key("ed25519")));

    assertThat(keys.keys())
        .extracting(SigningKey::name, SigningKey::scheme)
        .containsExactly(
            tuple("ecdsa.pub", "SHA256withECDSA"),
            tuple("rsa.pub", "SHA256withRSA"),
            tuple("ed25519.pub", "Ed25519"));
    assertThat(keys.keys())
        .extracting(k -> k.key().getAlgorithm())
        .containsExactly("EC", "RSA", "EdDSA");
  }

  @Test
  void aKeyVerifiesItsOwnSignaturesOnly() throws Exception {
    KeyPair pair = generate("Ed25519", null);
    Path file = write("signer.pub", pem(pair.getPublic()));
    SigningKey key = SigningKeys.read(file);
    byte[] payload = "payload".getBytes(StandardCharsets.UTF_8);
    Signature signer = Signature.getInstance("Ed25519");
    signer.initSign(pair.getPrivate());
    signer.update(payload);
    byte[] signature = signer.sign();

    assertThat(key.verifies(payload, signature)).isTrue();
    assertThat(key.verifies("payloaD".getBytes(StandardCharsets.UTF_8), signature)).isFalse();
    assertThat(key.verifies(payload, new byte[] {1, 2, 3})).isFalse();
  }

  @Test
  void anEd25519KeyVerifiesItsPrehashedSignaturesAsCosign3MakesThem() throws Exception {
    KeyPair pair = generate("Ed25519", null);
    SigningKey key = SigningKeys.read(write("ph.pub", pem(pair.getPublic())));
    byte[] payload = "payload".getBytes(StandardCharsets.UTF_8);
    Signature signer = Signature.getInstance("Ed25519");
    signer.setParameter(new EdDSAParameterSpec(true));
    signer.initSign(pair.getPrivate());
    signer.update(payload);
    byte[] prehashed = signer.sign();

    assertThat(key.verifies(payload, prehashed)).isTrue();
    assertThat(key.verifies("payloaD".getBytes(StandardCharsets.UTF_8), prehashed)).isFalse();
    SigningKey other =
        SigningKeys.read(write("other.pub", pem(generate("Ed25519", null).getPublic())));
    assertThat(other.verifies(payload, prehashed)).isFalse();
  }

  @Test
  void refusesAPrivateKey() throws Exception {
    Path file = write("cosign.key", pem(generate("EC", "secp256r1").getPrivate()));

    assertThatThrownBy(() -> SigningKeys.read(file))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining(file.toString())
        .hasMessageContaining("is not a public key");
  }

  @Test
  void refusesAnRsaKeyBelow2048Bits() throws Exception {
    KeyPairGenerator generator = KeyPairGenerator.getInstance("RSA");
    generator.initialize(1024);
    Path file = write("small.pub", pem(generator.generateKeyPair().getPublic()));

    assertThatThrownBy(() -> SigningKeys.read(file))
        .hasMessageContaining("RSA of 1024 bits: at least 2048");
  }

  @Test
  void refusesAnEcdsaKeyOnAnotherCurve() throws Exception {
    Path file = write("p384.pub", pem(generate("EC", "secp384r1").getPublic()));

    assertThatThrownBy(() -> SigningKeys.read(file)).hasMessageContaining("only P-256");
  }

  @Test
  void refusesAnEd448Key() throws Exception {
    Path file = write("ed448.pub", pem(generate("Ed448", null).getPublic()));

    assertThatThrownBy(() -> SigningKeys.read(file))
        .hasMessageContaining("accepted are ECDSA P-256, RSA and Ed25519");
  }

  @Test
  void refusesAFileWithoutPem() throws IOException {
    Path empty = write("empty.pub", "");
    Path text = write("text.pub", "not a key\n");

    assertThatThrownBy(() -> SigningKeys.read(empty)).hasMessageContaining("holds no PEM object");
    assertThatThrownBy(() -> SigningKeys.read(text)).hasMessageContaining("holds no PEM object");
  }

  @Test
  void refusesTwoKeysInOneFile() throws Exception {
    Path file =
        write(
            "two.pub",
            pem(generate("Ed25519", null).getPublic())
                + pem(generate("Ed25519", null).getPublic()));

    assertThatThrownBy(() -> SigningKeys.read(file)).hasMessageContaining("more than one PEM");
  }

  @Test
  void refusesACorruptKey() throws IOException {
    Path file =
        write("corrupt.pub", "-----BEGIN PUBLIC KEY-----\nAAAA\n-----END PUBLIC KEY-----\n");

    assertThatThrownBy(() -> SigningKeys.read(file))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining(file.toString());
  }

  @Test
  void refusesAMissingFileAndAnEmptySet() {
    Path missing = dir.resolve("missing.pub");

    assertThatThrownBy(() -> SigningKeys.read(missing))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining(missing.toString());
    assertThatThrownBy(() -> SigningKeys.load(List.of()))
        .hasMessageContaining("at least one public key");
  }

  static KeyPair generate(String algorithm, String curve) throws GeneralSecurityException {
    KeyPairGenerator generator = KeyPairGenerator.getInstance(algorithm);
    if (curve != null) {
      generator.initialize(new ECGenParameterSpec(curve));
    }
    return generator.generateKeyPair();
  }

  static String pem(Object key) throws IOException {
    StringWriter out = new StringWriter();
    try (JcaPEMWriter writer = new JcaPEMWriter(out)) {
      writer.writeObject(key);
    }
    return out.toString();
  }

  Path write(String name, String content) throws IOException {
    return Files.writeString(dir.resolve(name), content);
  }
}
