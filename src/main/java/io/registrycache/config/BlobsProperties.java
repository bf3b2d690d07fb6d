package io.registrycache.config;

import java.time.Duration;
import java.util.List;
import java.util.Locale;
import org.springframework.boot.context.properties.ConfigurationProperties;
import org.springframework.boot.context.properties.bind.DefaultValue;
import org.springframework.util.unit.DataSize;

/**
 * {@code registry-cache.blobs.*}: blob downloads.
 *
 * @param orphanDownloadTimeout how long a blob download goes on after every client that asked for
 *     it went away, so that the next pull is a hit; default 10 min
 * @param resumeAttempts how many times one blob download whose upstream transfer broke off is
 *     resumed from the last byte received ({@code Range: bytes=<next>-}) rather than failed; 0
 *     never resumes; default 3
 * @param prefetch {@code registry-cache.blobs.prefetch.*}: fetching the blobs of a manifest as soon
 *     as the manifest arrives
 * @param fillResponseMemory direct memory, in all, that responses streaming blobs still arriving
 *     from the upstream may hold (in 256 KiB buffers) while their clients drain them; a response
 *     that finds it all taken waits for a buffer to come back. It bounds what any number of clients
 *     joining fills can pin, and counts against {@code -XX:MaxDirectMemorySize} (the JVM's own
 *     direct buffers, not Netty's pool); one response holds at most 8 (2 MiB), so a client that
 *     stops reading keeps no more than that until its send times out; default 16MB
 * @param sendTimeout how long one write of a response to a client's connection may take before the
 *     connection is closed: a client that stops reading (or reads slower than a 256 KiB buffer in
 *     this time) is cut, and the buffers queued for it are freed; as nginx's {@code send_timeout};
 *     0 never cuts; default 60s
 */
@ConfigurationProperties("registry-cache.blobs")
public record BlobsProperties(
    @DefaultValue("10m") Duration orphanDownloadTimeout,
    @DefaultValue("3") int resumeAttempts,
    @DefaultValue Prefetch prefetch,
    @DefaultValue("16MB") DataSize fillResponseMemory,
    @DefaultValue("60s") Duration sendTimeout) {

  public BlobsProperties {
    if (sendTimeout.isNegative()) {
      throw new IllegalArgumentException(
          "registry-cache.blobs.send-timeout must be 0 (never) or more, got " + sendTimeout);
    }
  }

  /** Settings with prefetch at its defaults (tests, tools). */
  public static BlobsProperties of(Duration orphanDownloadTimeout, int resumeAttempts) {
    return new BlobsProperties(
        orphanDownloadTimeout,
        resumeAttempts,
        Prefetch.DEFAULTS,
        DataSize.ofMegabytes(16),
        Duration.ofSeconds(60));
  }

  /**
   * Prefetch on manifest: when an image manifest is fetched from the upstream (a cold pull, or a
   * tag that moved), fills of its config and layers that are not stored yet start at once, through
   * the same single-flight as clients' requests, so the client's blob requests join fills already
   * running instead of each waiting for its own upstream round trip. Prefetch fills are bounded and
   * yield to clients: a client's request never waits for a prefetch slot.
   *
   * @param enabled whether manifests start fills of their blobs; default true
   * @param maxBytesPerManifest blobs of one manifest are prefetched, in order, until their
   *     announced sizes add up to this; default 2GB
   * @param maxInFlight prefetch fills in flight per upstream (the rest wait their turn; clients'
   *     own requests are not counted), and never more than half the upstream's {@code
   *     max-concurrent-requests}, so its other half stays free for clients; default 32 (at 50 ms
   *     from the upstream, 8 capped a cold rollout at about 160 blobs/s: docs/performance.md)
   * @param platforms {@code os/architecture[/variant]} of an image index whose layers are
   *     prefetched too (a platform matches entries that start with it: {@code linux/arm64} takes
   *     {@code linux/arm64/v8}); an index's child manifests are always prefetched (they are small);
   *     default none
   * @param unrequestedAfter a prefetched blob no client asked for within this time counts as
   *     prefetched in vain ({@code registry_cache_prefetch_unrequested_bytes_total}); default 10
   *     min
   * @param minUpstreamLatency no prefetch from an upstream whose quickest manifest fetch of the
   *     last one to two minutes took less than this: a nearby upstream answers each client request
   *     about as fast, and prefetching only adds work (the quickest, not the latest: on a busy
   *     cache fetches take longer in its own queues); 0 prefetches always; default 10 ms
   */
  public record Prefetch(
      @DefaultValue("true") boolean enabled,
      @DefaultValue("2GB") DataSize maxBytesPerManifest,
      @DefaultValue("32") int maxInFlight,
      @DefaultValue List<String> platforms,
      @DefaultValue("10m") Duration unrequestedAfter,
      @DefaultValue("10ms") Duration minUpstreamLatency) {

    /** Every default. */
    public static final Prefetch DEFAULTS =
        new Prefetch(
            true,
            DataSize.ofGigabytes(2),
            32,
            List.of(),
            Duration.ofMinutes(10),
            Duration.ofMillis(10));

    public Prefetch {
      platforms = List.copyOf(platforms);
    }

    /** Whether the layers of an index entry for {@code platform} are prefetched. */
    public boolean layersOf(String platform) {
      if (platform == null) {
        return false;
      }
      String p = platform.toLowerCase(Locale.ROOT);
      for (String w : platforms) {
        String wanted = w.strip().toLowerCase(Locale.ROOT);
        if (p.equals(wanted) || p.startsWith(wanted + "/")) {
          return true;
        }
      }
      return false;
    }
  }
}
