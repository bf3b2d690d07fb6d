package io.registrycache.signature;

import java.security.GeneralSecurityException;
import java.security.InvalidKeyException;
import java.security.PublicKey;
import java.security.Signature;
import java.security.SignatureException;

/**
 * One public key that image signatures are checked with, and the signature scheme cosign uses with
 * a key of its type (sigstore's {@code signature.LoadVerifier} with SHA-256).
 *
 * @param name what the key is called in verdicts and messages: its file name
 * @param key the public key
 * @param scheme the {@code java.security.Signature} algorithm: {@code SHA256withECDSA} (ECDSA
 *     P-256, ASN.1 DER signatures), {@code SHA256withRSA} (RSASSA-PKCS1-v1_5) or {@code Ed25519}
 *     (pure Ed25519, RFC 8032)
 */
public record SigningKey(String name, PublicKey key, String scheme) {

  /**
   * Whether {@code signature} is this key's signature over exactly {@code payload}. A signature
   * that is not even in the scheme's encoding is no signature of this key: false, not an error.
   */
  public boolean verifies(byte[] payload, byte[] signature) {
    try {
      Signature check = Signature.getInstance(scheme);
      check.initVerify(key);
      check.update(payload);
      return check.verify(signature);
    } catch (SignatureException malformed) {
      return false;
    } catch (InvalidKeyException e) {
      throw new IllegalStateException("key " + name + " does not fit " + scheme, e);
    } catch (GeneralSecurityException e) {
      throw new IllegalStateException(scheme + " is not available in this JVM", e);
    }
  }

  @Override
  public String toString() {
    return name + " (" + scheme + ")";
  }
}
