package io.registrycache.storage;

import io.registrycache.oci.Digest;
import java.time.Instant;
import java.util.List;
import java.util.Optional;

/**
 * Where tag links are kept durably: a tag of a repository of an upstream → a digest, with when the
 * upstream last confirmed it ({@link TagRef}). Files under {@code tags/} ({@link
 * FileTagPersistence}) or objects in the bucket ({@code s3.S3TagPersistence}). What is fresh, to
 * revalidate or stale is decided above it ({@code proxy.TagFreshness}); this only stores it. Every
 * method blocks.
 */
public interface TagPersistence {

  /** Every tag link, all upstreams and repositories; unreadable ones skipped. */
  List<TagRef> all();

  /** The link of a tag, if any. */
  Optional<TagRef> find(String upstreamKey, String name, String tag);

  /** Points a tag at a digest, confirmed by the upstream at {@code validatedAt}. */
  void put(String upstreamKey, String name, String tag, Digest digest, Instant validatedAt);

  /**
   * Records that the upstream confirmed an existing tag link at {@code validatedAt}, keeping the
   * digest it has now (a {@link #put} racing it wins); no-op when absent.
   */
  void touch(String upstreamKey, String name, String tag, Instant validatedAt);

  /** Removes a tag link; absent is fine. */
  void delete(String upstreamKey, String name, String tag);

  /** The tags of one repository, in lexical order. */
  List<String> list(String upstreamKey, String name);
}
