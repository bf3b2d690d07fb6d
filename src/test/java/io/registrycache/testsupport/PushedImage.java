package io.registrycache.testsupport;

import io.registrycache.oci.Digest;

/**
 * An image a test pushed with {@code ImagePusher}, as the upstream client's tests compare it: the
 * exact bytes of manifest, config and (first) layer, and their {@link Digest}s.
 */
public record PushedImage(
    byte[] manifest,
    Digest manifestDigest,
    byte[] config,
    Digest configDigest,
    byte[] layer,
    Digest layerDigest) {

  public static PushedImage of(TestImages.Image image) {
    TestImages.Blob layer = image.layers().get(0);
    return new PushedImage(
        image.manifest().bytes(), Digest.parse(image.manifest().digest()),
        image.config().bytes(), Digest.parse(image.config().digest()),
        layer.bytes(), Digest.parse(layer.digest()));
  }
}
