package io.registrycache.proxy;

import io.registrycache.config.BlobsProperties;
import io.registrycache.config.RegistryCacheProperties;
import io.registrycache.oci.ManifestContent;
import io.registrycache.oci.ManifestContent.Descriptor;
import io.registrycache.oci.RepositoryName;
import io.registrycache.upstream.Upstream;
import java.time.Duration;
import java.util.ArrayDeque;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.TimeUnit;
import java.util.function.Supplier;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import org.springframework.beans.factory.annotation.Autowired;
import org.springframework.stereotype.Component;
import reactor.core.publisher.Mono;

/**
 * Prefetch on manifest ({@code registry-cache.blobs.prefetch.*}): when an image manifest arrives
 * from the upstream, the fills of its config and layers start at once ({@link
 * ProxyBlobService#prefetch}), so that the client's blob requests, which follow one round trip
 * each, join fills already running. The cache knows from the manifest exactly what comes next.
 *
 * <p>Bounded: blobs of one manifest in order until {@code max-bytes-per-manifest}, and at most
 * {@code max-in-flight} prefetch fills per upstream; the rest wait in a queue of their upstream (up
 * to {@value #MAX_QUEUED} blobs, beyond which prefetches are dropped). Clients' own requests take
 * no slot, so a prefetch never delays one: a client asking for a queued blob starts its fill
 * itself. Foreign (non-distributable) layers are never fetched.
 */
@Component
public class Prefetcher {

  private static final Logger log = LoggerFactory.getLogger(Prefetcher.class);

  /** Blobs waiting for a prefetch slot, per upstream, beyond which prefetches are dropped. */
  static final int MAX_QUEUED = 10_000;

  private final ProxyBlobService blobs;
  private final BlobsProperties.Prefetch settings;
  private final Map<String, Lane> lanes = new ConcurrentHashMap<>();
  private final Map<String, Distance> distances = new ConcurrentHashMap<>();

  @Autowired
  public Prefetcher(ProxyBlobService blobs, RegistryCacheProperties properties) {
    this(blobs, properties.blobs().prefetch());
  }

  private Prefetcher(ProxyBlobService blobs, BlobsProperties.Prefetch settings) {
    this.blobs = blobs;
    this.settings = settings;
  }

  /** No prefetch (for services built without Spring). */
  static Prefetcher none() {
    BlobsProperties.Prefetch d = BlobsProperties.Prefetch.DEFAULTS;
    return new Prefetcher(
        null,
        new BlobsProperties.Prefetch(
            false,
            d.maxBytesPerManifest(),
            d.maxInFlight(),
            d.platforms(),
            d.unrequestedAfter(),
            d.minUpstreamLatency()));
  }

  /** Whether prefetch on manifest is on. */
  public boolean enabled() {
    return settings.enabled();
  }

  /**
   * Whether a manifest of {@code upstream} that took {@code took} to arrive (from the request to
   * the last byte of its body) starts prefetches: only when the upstream is at least {@code
   * blobs.prefetch.min-upstream-latency} away. On a nearby upstream a client's own request costs no
   * round trip worth hiding, and the prefetch would only add work (measured: cold images/s 28.3
   * without, 25.1 with, on loopback).
   *
   * <p>The distance is the quickest fetch of the last one to two minutes, not this one: on a busy
   * cache every fetch of a nearby upstream takes longer (queues, not the network), and prefetching
   * then would add work exactly when there is least to spare.
   */
  boolean worthIt(String upstream, Duration took) {
    if (!settings.enabled()) {
      return false;
    }
    long floor =
        distances
            .computeIfAbsent(upstream, k -> new Distance())
            .record(took.toNanos(), System.nanoTime());
    return floor >= settings.minUpstreamLatency().toNanos();
  }

  /** The quickest manifest fetch of an upstream in this window and the one before (nanoseconds). */
  static final class Distance {
    static final long WINDOW_NANOS = TimeUnit.MINUTES.toNanos(1);
    private long windowStart = Long.MIN_VALUE;
    private long current = Long.MAX_VALUE;
    private long previous = Long.MAX_VALUE;

    /**
     * Records a fetch of {@code tookNanos} at {@code nowNanos}; returns the floor (nanoseconds).
     */
    synchronized long record(long tookNanos, long nowNanos) {
      if (windowStart == Long.MIN_VALUE) {
        windowStart = nowNanos;
      } else if (nowNanos - windowStart >= WINDOW_NANOS) {
        previous = nowNanos - windowStart >= 2 * WINDOW_NANOS ? Long.MAX_VALUE : current;
        current = Long.MAX_VALUE;
        windowStart = nowNanos;
      }
      current = Math.min(current, tookNanos);
      return Math.min(current, previous);
    }
  }

  /**
   * Whether the layers of an index entry for {@code platform} are prefetched along with its
   * manifest.
   */
  boolean layersOf(String platform) {
    return settings.layersOf(platform);
  }

  /**
   * An image manifest of {@code name} arrived from {@code upstream}: its config and layers that are
   * not stored are queued for prefetch. Returns at once.
   */
  void imageManifest(Upstream upstream, RepositoryName name, ManifestContent manifest) {
    if (!settings.enabled() || manifest.isIndex()) {
      return;
    }
    long budget = settings.maxBytesPerManifest().toBytes();
    long planned = 0;
    Lane lane = lanes.computeIfAbsent(upstream.key(), k -> new Lane(slots(upstream)));
    for (Descriptor d : manifest.references()) {
      if (!d.distributable()) {
        continue;
      }
      planned += Math.max(0, d.size());
      if (planned > budget) {
        log.debug(
            "prefetch of {}/{} stops at {} bytes (blobs.prefetch.max-bytes-per-manifest)",
            upstream.key(),
            name,
            budget);
        break;
      }
      lane.submit(() -> blobs.prefetch(upstream, name, d.digest()));
    }
  }

  /**
   * Prefetch fills of {@code upstream} at once: {@code max-in-flight}, at most half its {@code
   * max-concurrent-requests} (its connection pool), at least 1.
   */
  int slots(Upstream upstream) {
    int pool =
        upstream.settings() == null
            ? Integer.MAX_VALUE
            : upstream.settings().maxConcurrentRequests();
    return Math.max(1, Math.min(settings.maxInFlight(), pool / 2));
  }

  /** The prefetch fills of one upstream: at most {@link #slots} at once, the rest queued. */
  private static final class Lane {
    private final ArrayDeque<Supplier<Mono<Long>>> queue = new ArrayDeque<>();
    private final int slots;
    private int inFlight;

    Lane(int slots) {
      this.slots = slots;
    }

    void submit(Supplier<Mono<Long>> fill) {
      synchronized (this) {
        if (inFlight >= slots) {
          if (queue.size() < MAX_QUEUED) {
            queue.add(fill);
          }
          return;
        }
        inFlight++;
      }
      run(fill);
    }

    private void run(Supplier<Mono<Long>> fill) {
      Mono.defer(fill)
          .doFinally(signal -> next())
          .subscribe(null, e -> log.debug("prefetch failed: {}", e.toString()));
    }

    private void next() {
      Supplier<Mono<Long>> fill;
      synchronized (this) {
        fill = queue.poll();
        if (fill == null) {
          inFlight--;
          return;
        }
      }
      run(fill);
    }
  }
}
