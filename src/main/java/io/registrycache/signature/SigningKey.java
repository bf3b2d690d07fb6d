package io.registrycache.signature;

import java.security.GeneralSecurityException;
import java.security.InvalidKeyException;
import java.security.PublicKey;
import java.security.Signature;
import java.security.SignatureException;
import java.security.spec.EdDSAParameterSpec;

/**
 * One public key that image signatures are checked with, and the signature scheme cosign uses with
 * a key of its type (sigstore's {@code signature.LoadVerifier} with SHA-256).
 *
 * @param name what the key is called in verdicts and messages: its file name
 * @param key the public key
 * @param scheme the {@code java.security.Signature} algorithm: {@code SHA256withECDSA} (ECDSA
 *     P-256, ASN.1 DER signatures), {@code SHA256withRSA} (RSASSA-PKCS1-v1_5) or {@code Ed25519}
 *     (pure Ed25519, as cosign 2 signs, or Ed25519ph, as cosign 3 does; RFC 8032)
 */
public record SigningKey(String name, PublicKey key, String scheme) {

  /**
   * Whether {@code signature} is this key's signature over exactly {@code payload}. A signature
   * that is not even in the scheme's encoding is no signature of this key: false, not an error.
   */
  public boolean verifies(byte[] payload, byte[] signature) {
    return verifies(payload, signature, false)
        // cosign 3 signs with an Ed25519 key in its pre-hashed variant (sigstore's ED25519_PH)
        || (ED25519.equals(scheme) && verifies(payload, signature, true));
  }

  /** The scheme of an Ed25519 key: pure Ed25519, or with {@code prehash} Ed25519ph (RFC 8032). */
  static final String ED25519 = "Ed25519";

  private boolean verifies(byte[] payload, byte[] signature, boolean ed25519ph) {
    try {
      Signature check = Signature.getInstance(scheme);
      if (ed25519ph) {
        check.setParameter(new EdDSAParameterSpec(true));
      }
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
