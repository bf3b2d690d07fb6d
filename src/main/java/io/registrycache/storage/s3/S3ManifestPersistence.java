package io.registrycache.storage.s3;

import io.registrycache.oci.Digest;
import io.registrycache.oci.MediaType;
import io.registrycache.storage.LinkPersistence;
import io.registrycache.storage.ManifestPersistence;
import io.registrycache.storage.TagPersistence;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.Optional;
import java.util.function.Consumer;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Manifests in the S3-API object store ({@code storage.type=s3}), in the file store's layout under
 * the store's prefix: {@code manifests/<algorithm>/<hex>} (the bytes as the upstream sent them)
 * with {@code manifests/<algorithm>/<hex>.type} (the media type); tag links beside them ({@link
 * S3TagPersistence}). Every object is written whole by one PUT, so readers never see half of one.
 * Last pulls go to the bucket's pull records ({@link S3LastPulls}) when given, with the blobs'.
 */
public final class S3ManifestPersistence implements ManifestPersistence {

  private static final Logger log = LoggerFactory.getLogger(S3ManifestPersistence.class);
  private static final String MANIFESTS = "manifests/";
  private static final String TYPE = ".type";
  static final Duration TIMEOUT = Duration.ofMinutes(1);

  private final S3Objects objects;
  private final S3TagPersistence tags;
  private final S3LastPulls lastPulls;

  /** Last pulls of manifests in memory only. */
  public S3ManifestPersistence(S3Objects objects) {
    this(objects, null);
  }

  /**
   * @param lastPulls the bucket's pull records (shared with the blobs); {@code null}: memory only
   */
  public S3ManifestPersistence(S3Objects objects, S3LastPulls lastPulls) {
    this.objects = objects;
    this.tags = new S3TagPersistence(objects);
    this.lastPulls = lastPulls;
  }

  /** Recorded for the next delta of {@link S3LastPulls}. */
  @Override
  public void recordPull(Digest digest, long millis) {
    if (lastPulls != null) {
      lastPulls.record(digest, millis);
    }
  }

  static String key(Digest digest) {
    return MANIFESTS + digest.algorithm() + "/" + digest.hex();
  }

  /** Links of manifests in the bucket ({@link S3Links}), looked up on first use. */
  @Override
  public LinkPersistence links() {
    return new S3Links(objects, "manifests", true);
  }

  /**
   * Lists {@code manifests/}; last pulled: the latest of the last write and the bucket's pull
   * records.
   */
  @Override
  public void scan(Consumer<Found> visitor) {
    if (lastPulls != null) {
      lastPulls.refreshIfOlder(Duration.ofSeconds(5));
    }
    objects
        .listContentWithSizes(MANIFESTS)
        .filter(o -> !o.key().endsWith(TYPE))
        .doOnNext(
            o -> {
              String rest = o.key().substring(MANIFESTS.length());
              String value = rest.replaceFirst("/", ":");
              if (!Digest.looksLikeDigest(value)) {
                log.warn("object store: skipping {}, not a manifest key", o.key());
                return;
              }
              Digest digest = Digest.parse(value);
              long created = o.lastModified().toEpochMilli();
              long pulled = created;
              if (lastPulls != null) {
                lastPulls.noteKnown(digest, created);
                pulled = Math.max(created, lastPulls.lastPull(digest).orElse(created));
              }
              visitor.accept(new Found(digest, o.size(), created, pulled));
            })
        .blockLast(S3BlobBackend.REQUEST_TIMEOUT);
  }

  /** Two GETs: the bytes, then the type. */
  @Override
  public Optional<Stored> read(Digest digest) throws IOException {
    Optional<byte[]> body = S3Calls.await(objects.readAll(key(digest)), TIMEOUT);
    if (body.isEmpty()) {
      return Optional.empty();
    }
    String type =
        S3Calls.await(objects.readAll(key(digest) + TYPE), TIMEOUT)
            .map(b -> new String(b, StandardCharsets.UTF_8).trim())
            .orElseGet(() -> ManifestPersistence.mediaTypeField(body.get()));
    return Optional.of(new Stored(type, body.get()));
  }

  /**
   * The type first, when the body does not name it ({@link ManifestPersistence#mediaTypeField}),
   * then the bytes: a manifest whose bytes are there always has its type. One request per manifest
   * that names its own type.
   */
  @Override
  public void write(Digest digest, MediaType mediaType, byte[] body) throws IOException {
    String type = mediaType.toString();
    if (!type.equals(ManifestPersistence.mediaTypeField(body))) {
      S3Calls.await(
          objects.putBytes(key(digest) + TYPE, (type + "\n").getBytes(StandardCharsets.UTF_8)),
          TIMEOUT);
    }
    S3Calls.await(objects.putBytes(key(digest), body), TIMEOUT);
  }

  @Override
  public void delete(Digest digest) throws IOException {
    S3Calls.await(objects.delete(key(digest)), TIMEOUT);
    S3Calls.await(objects.delete(key(digest) + TYPE), TIMEOUT);
  }

  /** Tag links in the bucket, beside the manifests ({@link S3TagPersistence}). */
  @Override
  public TagPersistence tags() {
    return tags;
  }
}
