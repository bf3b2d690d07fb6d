package io.registrycache.storage;

import io.registrycache.oci.Digest;
import java.io.IOException;
import java.util.Optional;
import java.util.function.BiConsumer;

/**
 * Where {@link ContentLinks} are kept durably: a journal on the file system ({@link LinkJournal})
 * or objects in the bucket ({@code s3.S3Links}). Every method blocks.
 */
public interface LinkPersistence {
  /** Visits every link with its digest and {@code <upstream>/<repository>} key. */
  void scan(BiConsumer<Digest, String> visitor);

  /**
   * Records a link; idempotent.
   *
   * @param upstreamSegment the upstream key, made path-safe
   */
  void create(Digest digest, String upstreamSegment, String repository) throws IOException;

  /** Removes every link of {@code digest}; best effort. */
  void removeAll(Digest digest);

  /**
   * Looks for a link recorded since {@link #scan} (by another replica on a shared store): the link
   * of {@code digest} to {@code repository} of the upstream, or to any repository of it when {@code
   * repository} is null. Returns its {@code <upstream>/<repository>} key. The default finds
   * nothing: a store only this process writes has every link in memory.
   */
  default Optional<String> find(Digest digest, String upstreamSegment, String repository) {
    return Optional.empty();
  }

  /**
   * Whether links are looked up on first use ({@link #find}, through {@link ContentLinks#recheck})
   * instead of all read by {@link #scan} at start-up.
   */
  default boolean onDemand() {
    return false;
  }

  /** Releases what it holds open; later calls may reopen it. */
  default void close() {}
}
