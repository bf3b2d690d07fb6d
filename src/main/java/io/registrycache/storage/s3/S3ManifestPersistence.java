package io.registrycache.storage.s3;

import io.registrycache.storage.LinkPersistence;
import io.registrycache.oci.Digest;
import io.registrycache.oci.MediaType;
import io.registrycache.storage.ManifestPersistence;
import io.registrycache.storage.TagRef;
import java.io.IOException;
import java.io.InterruptedIOException;
import java.io.UncheckedIOException;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.List;
import java.util.Optional;
import java.util.function.Consumer;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import reactor.core.publisher.Mono;

/**
 * Manifests and tag links in the S3-API object store ({@code storage.type=s3}), in the file
 * store's layout under the store's prefix: {@code manifests/<algorithm>/<hex>} (the bytes as the
 * upstream sent them) with {@code manifests/<algorithm>/<hex>.type} (the media type), and {@code
 * tags/<upstream>/<repository>/_tags/<tag>} holding {@code <digest>\n<epoch millis>\n}: the digest
 * and when the upstream last confirmed it (in the body, since an object's own time cannot be set).
 * Every object is written whole by one PUT, so readers never see half of one. The last pull of a
 * manifest is not recorded here (memory only, as for blobs on S3).
 */
public final class S3ManifestPersistence implements ManifestPersistence {

  private static final Logger log = LoggerFactory.getLogger(S3ManifestPersistence.class);
  private static final String MANIFESTS = "manifests/";
  private static final String TAGS = "tags/";
  private static final String TAG_FOLDER = "/_tags/";
  private static final String TYPE = ".type";
  private static final Duration TIMEOUT = Duration.ofMinutes(1);

  private final S3Objects objects;

  public S3ManifestPersistence(S3Objects objects) {
    this.objects = objects;
  }

  static String key(Digest digest) {
    return MANIFESTS + digest.algorithm() + "/" + digest.hex();
  }

  static String tagKey(String upstreamKey, String name, String tag) {
    return tagsPrefix(upstreamKey, name) + tag;
  }

  private static String tagsPrefix(String upstreamKey, String name) {
    return TAGS + upstreamKey.replaceAll("[^A-Za-z0-9._:-]", "_") + "/" + name + TAG_FOLDER;
  }

  /** Links of manifests in the bucket ({@link S3Links}), looked up on first use. */
  @Override
  public io.registrycache.storage.LinkPersistence links() {
    return new S3Links(objects, "manifests", true);
  }

  @Override
  public void scan(Consumer<Found> visitor) {
    objects.listContentWithSizes(MANIFESTS)
        .filter(o -> !o.key().endsWith(TYPE))
        .doOnNext(o -> {
          String rest = o.key().substring(MANIFESTS.length());
          String value = rest.replaceFirst("/", ":");
          if (!Digest.looksLikeDigest(value)) {
            log.warn("object store: skipping {}, not a manifest key", o.key());
            return;
          }
          long created = o.lastModified().toEpochMilli();
          visitor.accept(new Found(Digest.parse(value), o.size(), created, created));
        })
        .blockLast(S3BlobBackend.REQUEST_TIMEOUT);
  }

  @Override
  public Optional<byte[]> body(Digest digest) throws IOException {
    return await(objects.readAll(key(digest)));
  }

  @Override
  public Optional<String> mediaType(Digest digest) throws IOException {
    return await(objects.readAll(key(digest) + TYPE)).map(b -> new String(b, StandardCharsets.UTF_8).trim());
  }

  /** The type first, then the bytes: a manifest whose bytes are there always has its type. */
  @Override
  public void write(Digest digest, MediaType mediaType, byte[] body) throws IOException {
    await(objects.putBytes(key(digest) + TYPE, (mediaType + "\n").getBytes(StandardCharsets.UTF_8)));
    await(objects.putBytes(key(digest), body));
  }

  @Override
  public void delete(Digest digest) throws IOException {
    await(objects.delete(key(digest)));
    await(objects.delete(key(digest) + TYPE));
  }

  @Override
  public void recordPull(Digest digest, long millis) {
    // memory only on the object store
  }

  @Override
  public List<TagRef> allTags() {
    List<TagRef> out = new ArrayList<>();
    for (String key : unchecked(objects.list(TAGS).collectList())) {
      int folder = key.lastIndexOf(TAG_FOLDER);
      if (folder < 0) {
        continue;
      }
      String path = key.substring(TAGS.length(), folder);
      int slash = path.indexOf('/');
      if (slash < 0) {
        continue;
      }
      String upstream = path.substring(0, slash);
      String repository = path.substring(slash + 1);
      String tag = key.substring(folder + TAG_FOLDER.length());
      try {
        findTag(upstream, repository, tag).ifPresent(out::add);
      } catch (RuntimeException e) {
        log.warn("ignoring unreadable tag link {}: {}", key, e.toString());
      }
    }
    return out;
  }

  @Override
  public Optional<TagRef> findTag(String upstreamKey, String name, String tag) {
    return unchecked(objects.readAll(tagKey(upstreamKey, name, tag)))
        .map(b -> {
          String[] lines = new String(b, StandardCharsets.UTF_8).trim().split("\n");
          Instant validatedAt = lines.length > 1 ? Instant.ofEpochMilli(Long.parseLong(lines[1].trim())) : Instant.EPOCH;
          return new TagRef(upstreamKey, name, tag, Digest.parse(lines[0].trim()), validatedAt);
        });
  }

  @Override
  public void putTag(String upstreamKey, String name, String tag, Digest digest, Instant validatedAt) {
    byte[] body = (digest + "\n" + validatedAt.toEpochMilli() + "\n").getBytes(StandardCharsets.UTF_8);
    unchecked(objects.putBytes(tagKey(upstreamKey, name, tag), body));
  }

  /** Rewrites the link with the new time (an object's time cannot be set). */
  @Override
  public void touchTag(String upstreamKey, String name, String tag, Instant validatedAt) {
    findTag(upstreamKey, name, tag).ifPresent(ref -> putTag(upstreamKey, name, tag, ref.digest(), validatedAt));
  }

  @Override
  public void deleteTag(String upstreamKey, String name, String tag) {
    unchecked(objects.delete(tagKey(upstreamKey, name, tag)));
  }

  @Override
  public List<String> tags(String upstreamKey, String name) {
    String prefix = tagsPrefix(upstreamKey, name);
    List<String> tags = new ArrayList<>(unchecked(objects.list(prefix)
        .map(k -> k.substring(prefix.length()))
        .filter(t -> !t.isEmpty() && t.indexOf('/') < 0)
        .collectList()));
    tags.sort(null);
    return tags;
  }

  private static <T> T await(Mono<T> operation) throws IOException {
    try {
      return operation.block(TIMEOUT);
    } catch (RuntimeException e) {
      Throwable cause = reactor.core.Exceptions.unwrap(e);
      if (cause instanceof InterruptedException) {
        Thread.currentThread().interrupt();
        throw new InterruptedIOException("interrupted waiting for the object store");
      }
      throw new IOException("object store: " + cause, cause);
    }
  }

  private static <T> T unchecked(Mono<T> operation) {
    try {
      return await(operation);
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
  }
}
