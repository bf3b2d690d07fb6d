package io.registrycache.signature;

import java.io.IOException;
import java.io.Reader;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.security.PublicKey;
import java.security.interfaces.RSAPublicKey;
import java.util.ArrayList;
import java.util.List;
import java.util.Optional;
import org.bouncycastle.asn1.ASN1ObjectIdentifier;
import org.bouncycastle.asn1.edec.EdECObjectIdentifiers;
import org.bouncycastle.asn1.pkcs.PKCSObjectIdentifiers;
import org.bouncycastle.asn1.sec.SECObjectIdentifiers;
import org.bouncycastle.asn1.x509.SubjectPublicKeyInfo;
import org.bouncycastle.asn1.x9.X9ObjectIdentifiers;
import org.bouncycastle.openssl.PEMParser;
import org.bouncycastle.openssl.jcajce.JcaPEMKeyConverter;

/**
 * The public keys image signatures are checked with, each read from a PEM file holding one {@code
 * PUBLIC KEY} (an X.509 SubjectPublicKeyInfo, RFC 7468 section 13, as {@code cosign
 * generate-key-pair} and {@code openssl pkey -pubout} write it). Accepted: ECDSA on P-256
 * (secp256r1), RSA of 2048 bits or more, Ed25519. The PEM and DER are read by BouncyCastle; the
 * signature checks are the JDK's ({@link SigningKey#verifies}).
 */
public final class SigningKeys {

  /** The smallest RSA modulus accepted, in bits (as sigstore's key validation). */
  public static final int MIN_RSA_BITS = 2048;

  private final List<SigningKey> keys;

  /**
   * @param keys at least one key
   * @throws IllegalArgumentException when {@code keys} is empty
   */
  public SigningKeys(List<SigningKey> keys) {
    if (keys.isEmpty()) {
      throw new IllegalArgumentException("no signing keys: at least one public key is needed");
    }
    this.keys = List.copyOf(keys);
  }

  /**
   * Reads every file as one key, named by its file name.
   *
   * @throws IllegalArgumentException naming the file and why: unreadable, not PEM, not a public
   *     key, more than one PEM object, or a key type or size not accepted (see the class comment)
   */
  public static SigningKeys load(List<Path> files) {
    List<SigningKey> keys = new ArrayList<>();
    for (Path file : files) {
      keys.add(read(file));
    }
    return new SigningKeys(keys);
  }

  /** One key from a PEM file; errors as {@link #load}. */
  public static SigningKey read(Path file) {
    String name = file.getFileName().toString();
    Object first;
    Object second;
    try (Reader reader = Files.newBufferedReader(file, StandardCharsets.US_ASCII);
        PEMParser pem = new PEMParser(reader)) {
      first = pem.readObject();
      second = first == null ? null : pem.readObject();
    } catch (IOException | RuntimeException e) {
      throw new IllegalArgumentException(
          "signing key " + file + " cannot be read as PEM: " + e.getMessage(), e);
    }
    if (first == null) {
      throw new IllegalArgumentException(
          "signing key " + file + " holds no PEM object: expected -----BEGIN PUBLIC KEY-----");
    }
    if (second != null) {
      throw new IllegalArgumentException(
          "signing key " + file + " holds more than one PEM object: put one public key per file");
    }
    if (!(first instanceof SubjectPublicKeyInfo info)) {
      throw new IllegalArgumentException(
          "signing key "
              + file
              + " is not a public key (found "
              + first.getClass().getSimpleName()
              + "): expected -----BEGIN PUBLIC KEY-----, as cosign.pub");
    }
    return of(name, info, file.toString());
  }

  private static SigningKey of(String name, SubjectPublicKeyInfo info, String where) {
    ASN1ObjectIdentifier algorithm = info.getAlgorithm().getAlgorithm();
    String scheme;
    if (algorithm.equals(X9ObjectIdentifiers.id_ecPublicKey)) {
      Object curve = info.getAlgorithm().getParameters();
      if (!SECObjectIdentifiers.secp256r1.equals(curve)) {
        throw new IllegalArgumentException(
            "signing key " + where + " is ECDSA on curve " + curve + ": only P-256 is accepted");
      }
      scheme = "SHA256withECDSA";
    } else if (algorithm.equals(PKCSObjectIdentifiers.rsaEncryption)) {
      scheme = "SHA256withRSA";
    } else if (algorithm.equals(EdECObjectIdentifiers.id_Ed25519)) {
      scheme = SigningKey.ED25519;
    } else {
      throw new IllegalArgumentException(
          "signing key "
              + where
              + " has algorithm "
              + algorithm
              + ": accepted are ECDSA P-256, RSA and Ed25519");
    }
    PublicKey key;
    try {
      key = new JcaPEMKeyConverter().getPublicKey(info);
    } catch (IOException | RuntimeException e) {
      throw new IllegalArgumentException(
          "signing key " + where + " is not a valid key: " + e.getMessage(), e);
    }
    if (key instanceof RSAPublicKey rsa && rsa.getModulus().bitLength() < MIN_RSA_BITS) {
      throw new IllegalArgumentException(
          "signing key "
              + where
              + " is RSA of "
              + rsa.getModulus().bitLength()
              + " bits: at least "
              + MIN_RSA_BITS
              + " are needed");
    }
    return new SigningKey(name, key, scheme);
  }

  /** The keys, in the order given. */
  public List<SigningKey> keys() {
    return keys;
  }

  /** The first key whose signature over {@code payload} {@code signature} is, if any. */
  public Optional<SigningKey> signer(byte[] payload, byte[] signature) {
    return keys.stream().filter(k -> k.verifies(payload, signature)).findFirst();
  }

  @Override
  public String toString() {
    return keys.toString();
  }
}
