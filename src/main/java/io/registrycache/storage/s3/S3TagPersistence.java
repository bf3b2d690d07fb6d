package io.registrycache.storage.s3;

import io.registrycache.oci.Digest;
import io.registrycache.storage.TagPersistence;
import io.registrycache.storage.TagRef;
import java.nio.charset.StandardCharsets;
import java.time.Instant;
import java.util.ArrayList;
import java.util.List;
import java.util.Optional;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Tag links in the S3-API object store: {@code tags/<upstream>/<repository>/_tags/<tag>} holding
 * {@code <digest>\n<epoch millis>\n}: the digest and when the upstream last confirmed it (in the
 * body, since an object's own time cannot be set). Each written whole by one PUT.
 */
public final class S3TagPersistence implements TagPersistence {

  private static final Logger log = LoggerFactory.getLogger(S3TagPersistence.class);
  private static final String TAGS = "tags/";
  private static final String TAG_FOLDER = "/_tags/";

  private final S3Objects objects;

  /**
   * @param objects the bucket and prefix
   */
  public S3TagPersistence(S3Objects objects) {
    this.objects = objects;
  }

  static String tagKey(String upstreamKey, String name, String tag) {
    return tagsPrefix(upstreamKey, name) + tag;
  }

  private static String tagsPrefix(String upstreamKey, String name) {
    return TAGS + upstreamKey.replaceAll("[^A-Za-z0-9._:-]", "_") + "/" + name + TAG_FOLDER;
  }

  @Override
  public List<TagRef> all() {
    List<TagRef> out = new ArrayList<>();
    for (String key :
        S3Calls.unchecked(objects.list(TAGS).collectList(), S3ManifestPersistence.TIMEOUT)) {
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
        find(upstream, repository, tag).ifPresent(out::add);
      } catch (RuntimeException e) {
        log.warn("ignoring unreadable tag link {}: {}", key, e.toString());
      }
    }
    return out;
  }

  @Override
  public Optional<TagRef> find(String upstreamKey, String name, String tag) {
    return S3Calls.unchecked(
            objects.readAll(tagKey(upstreamKey, name, tag)), S3ManifestPersistence.TIMEOUT)
        .map(
            b -> {
              String[] lines = new String(b, StandardCharsets.UTF_8).trim().split("\n", -1);
              Instant validatedAt =
                  lines.length > 1
                      ? Instant.ofEpochMilli(Long.parseLong(lines[1].trim()))
                      : Instant.EPOCH;
              return new TagRef(upstreamKey, name, tag, Digest.parse(lines[0].trim()), validatedAt);
            });
  }

  @Override
  public void put(String upstreamKey, String name, String tag, Digest digest, Instant validatedAt) {
    byte[] body =
        (digest + "\n" + validatedAt.toEpochMilli() + "\n").getBytes(StandardCharsets.UTF_8);
    S3Calls.unchecked(
        objects.putBytes(tagKey(upstreamKey, name, tag), body), S3ManifestPersistence.TIMEOUT);
  }

  /** Rewrites the link with the new time (an object's time cannot be set). */
  @Override
  public void touch(String upstreamKey, String name, String tag, Instant validatedAt) {
    find(upstreamKey, name, tag)
        .ifPresent(ref -> put(upstreamKey, name, tag, ref.digest(), validatedAt));
  }

  @Override
  public void delete(String upstreamKey, String name, String tag) {
    S3Calls.unchecked(
        objects.delete(tagKey(upstreamKey, name, tag)), S3ManifestPersistence.TIMEOUT);
  }

  @Override
  public List<String> list(String upstreamKey, String name) {
    String prefix = tagsPrefix(upstreamKey, name);
    List<String> tags =
        new ArrayList<>(
            S3Calls.unchecked(
                objects
                    .list(prefix)
                    .map(k -> k.substring(prefix.length()))
                    .filter(t -> !t.isEmpty() && t.indexOf('/') < 0)
                    .collectList(),
                S3ManifestPersistence.TIMEOUT));
    tags.sort(null);
    return tags;
  }
}
