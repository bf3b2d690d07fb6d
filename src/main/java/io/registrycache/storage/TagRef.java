package io.registrycache.storage;

import io.registrycache.oci.Digest;
import java.time.Instant;

/**
 * A tag link on disk: where a cached tag points, and when the upstream last confirmed it.
 *
 * @param upstream the upstream's configuration key
 * @param repository the repository name
 * @param tag the tag
 * @param digest the manifest it points at
 * @param validatedAt when the upstream last confirmed it
 */
public record TagRef(
    String upstream, String repository, String tag, Digest digest, Instant validatedAt) {
  /** {@code <upstream>/<repository>:<tag>}, what prune patterns match. */
  public String image() {
    return upstream + "/" + repository + ":" + tag;
  }
}
