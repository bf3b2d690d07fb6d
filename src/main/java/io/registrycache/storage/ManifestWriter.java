package io.registrycache.storage;

import io.registrycache.oci.Digest;
import io.registrycache.oci.MediaType;
import java.io.ByteArrayOutputStream;
import java.nio.ByteBuffer;
import java.security.MessageDigest;

/**
 * Writes one manifest into a {@link ManifestStore}: the bytes are kept in memory (manifests are
 * bounded by {@code manifests.max-size-bytes}) and verified in {@link #commit}, the same contract
 * as a blob's writer.
 */
final class ManifestWriter implements ContentWriter {

  private final ManifestStore store;
  private final Digest digest;
  private final MediaType mediaType;
  private final MessageDigest md;
  private ByteArrayOutputStream bytes = new ByteArrayOutputStream();

  ManifestWriter(ManifestStore store, Digest digest, MediaType mediaType) {
    this.store = store;
    this.digest = digest;
    this.mediaType = mediaType;
    this.md = digest.newMessageDigest();
  }

  @Override
  public Digest digest() {
    return digest;
  }

  @Override
  public long written() {
    return bytes == null ? 0 : bytes.size();
  }

  @Override
  public void append(ByteBuffer buffer) {
    if (bytes == null) {
      throw new IllegalStateException("the write of manifest " + digest + " was committed or aborted");
    }
    md.update(buffer.duplicate());
    byte[] chunk = new byte[buffer.remaining()];
    buffer.get(chunk);
    bytes.writeBytes(chunk);
  }

  @Override
  public long commit(long expectedSize) {
    byte[] body = bytes.toByteArray();
    bytes = null;
    if (expectedSize >= 0 && body.length != expectedSize) {
      throw new ContentVerificationException(
          "manifest " + digest + ": got " + body.length + " bytes, " + expectedSize + " were announced");
    }
    if (!digest.matches(md)) {
      throw new ContentVerificationException(
          "manifest " + digest + ": the " + body.length + " bytes do not match the digest");
    }
    store.store(new StoredManifest(digest, mediaType, body));
    return body.length;
  }

  @Override
  public void abort() {
    bytes = null;
  }
}
