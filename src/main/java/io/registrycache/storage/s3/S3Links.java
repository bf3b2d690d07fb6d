package io.registrycache.storage.s3;

import io.registrycache.oci.Digest;
import io.registrycache.storage.ContentLinks;
import io.registrycache.storage.LinkPersistence;
import java.io.IOException;
import java.time.Duration;
import java.util.Optional;
import java.util.function.BiConsumer;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import reactor.core.Exceptions;

/**
 * Content links ({@link ContentLinks}) of one kind in the object store: an empty object {@code
 * links/<kind>/<algorithm>/<hex>/<upstream>/<repository>/_link} per link, so every replica on the
 * bucket (one started empty, one offline) serves content where another was allowed to. Either
 * loaded at start-up by one LIST per 1,000 links, or (as the store uses them) looked up on first
 * use, one HEAD per digest and repository: listing the links of 10,000 images took most of a
 * replica's start-up (docs/performance.md). A link another replica made later is found by one HEAD
 * ({@link #find}); a new link is one PUT; removing a digest's links is a LIST of its prefix and a
 * DELETE each.
 */
final class S3Links implements LinkPersistence {

  private static final Logger log = LoggerFactory.getLogger(S3Links.class);
  private static final String LINK = "/_link";
  private static final Duration TIMEOUT = Duration.ofMinutes(1);

  private final S3Objects objects;
  private final String base;
  private final boolean onDemand;

  /**
   * @param kind {@code blobs} or {@code manifests}
   * @param onDemand look links up on first use instead of listing them all at start-up
   */
  S3Links(S3Objects objects, String kind, boolean onDemand) {
    this.objects = objects;
    this.base = "links/" + kind + "/";
    this.onDemand = onDemand;
  }

  @Override
  public boolean onDemand() {
    return onDemand;
  }

  private String digestPrefix(Digest digest) {
    return base + digest.algorithm() + "/" + digest.hex() + "/";
  }

  @Override
  public void scan(BiConsumer<Digest, String> visitor) {
    objects
        .list(base)
        .doOnNext(
            key -> {
              // <algorithm>/<hex>/<upstream>/<repository...>/_link
              String rest = key.substring(base.length());
              String[] parts = rest.split("/", 3);
              if (!key.endsWith(LINK)
                  || parts.length < 3
                  || !Digest.looksLikeDigest(parts[0] + ":" + parts[1])) {
                log.warn("object store: ignoring unexpected link object {}", key);
                return;
              }
              String link = parts[2].substring(0, parts[2].length() - LINK.length());
              if (link.indexOf('/') < 0) {
                log.warn("object store: ignoring unexpected link object {}", key);
                return;
              }
              visitor.accept(Digest.parse(parts[0] + ":" + parts[1]), link);
            })
        .blockLast(S3BlobBackend.REQUEST_TIMEOUT);
  }

  @Override
  public void create(Digest digest, String upstreamSegment, String repository) throws IOException {
    try {
      objects
          .putBytes(digestPrefix(digest) + upstreamSegment + "/" + repository + LINK, new byte[0])
          .block(TIMEOUT);
    } catch (RuntimeException e) {
      throw new IOException("object store: cannot link " + digest, Exceptions.unwrap(e));
    }
  }

  /** One HEAD of the link's object, or (any repository) one LIST of at most one key. */
  @Override
  public Optional<String> find(Digest digest, String upstreamSegment, String repository) {
    try {
      if (repository != null) {
        String key = digestPrefix(digest) + upstreamSegment + "/" + repository + LINK;
        return objects.stat(key).block(TIMEOUT).map(info -> upstreamSegment + "/" + repository);
      }
      String prefix = digestPrefix(digest) + upstreamSegment + "/";
      return objects
          .list(prefix)
          .filter(k -> k.endsWith(LINK))
          .next()
          .blockOptional(TIMEOUT)
          .map(
              k ->
                  upstreamSegment + "/" + k.substring(prefix.length(), k.length() - LINK.length()));
    } catch (RuntimeException e) {
      log.warn("object store: cannot look for a link of {}: {}", digest, e.toString());
      return Optional.empty();
    }
  }

  @Override
  public void removeAll(Digest digest) {
    try {
      objects.list(digestPrefix(digest)).concatMap(objects::delete).blockLast(TIMEOUT);
    } catch (RuntimeException e) {
      log.warn("object store: cannot remove the links of {}: {}", digest, e.toString());
    }
  }
}
