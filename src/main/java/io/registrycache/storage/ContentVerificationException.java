package io.registrycache.storage;

import io.registrycache.oci.OciErrorCode;
import io.registrycache.oci.OciException;
import org.springframework.http.HttpStatus;

/**
 * The bytes offered to a store are not the content they claim to be (wrong digest or size): {@code
 * DIGEST_INVALID}, 502 — the cache only ever stores what an upstream sent, so the upstream is at
 * fault. Nothing was kept.
 */
public class ContentVerificationException extends OciException {

  public ContentVerificationException(String message) {
    super(OciErrorCode.DIGEST_INVALID, HttpStatus.BAD_GATEWAY, message);
  }
}
