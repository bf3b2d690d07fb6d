package io.registrycache.proxy;

import io.registrycache.config.RegistryCacheProperties;
import io.registrycache.metrics.CacheMetrics;
import io.registrycache.tracing.PullTracing;
import io.registrycache.upstream.UpstreamClient;
import java.time.Clock;
import org.springframework.beans.factory.annotation.Qualifier;
import org.springframework.stereotype.Component;
import reactor.core.scheduler.Scheduler;

/**
 * What every pull-through service of a replica stands on — blobs, manifests, tags and referrers
 * alike: the upstream client, the worker pool for blocking storage calls, the cache metrics, the
 * settings, the clock and the other replicas ({@link PeerSource}). One bean, so that each service
 * names only what is its own (its store, its collaborators).
 *
 * @param upstreams every request to an upstream goes through it
 * @param storage the bounded scheduler blocking storage calls run on ({@code storageScheduler})
 * @param metrics hit, miss and upstream metrics
 * @param properties the settings ({@code registry-cache.*})
 * @param clock the clock tag freshness and referrer lists are timed with
 * @param peers where misses of content owned by another replica are filled from
 * @param tracing whether pulls are traced ({@code management.tracing.export.enabled})
 */
@Component
public record PullThroughContext(
    UpstreamClient upstreams,
    @Qualifier("storageScheduler") Scheduler storage,
    CacheMetrics metrics,
    RegistryCacheProperties properties,
    Clock clock,
    PeerSource peers,
    PullTracing tracing) {

  /** A single replica's context (no other replicas), for services built without Spring. */
  public static PullThroughContext single(
      UpstreamClient upstreams,
      Scheduler storage,
      CacheMetrics metrics,
      RegistryCacheProperties properties,
      Clock clock) {
    return new PullThroughContext(
        upstreams, storage, metrics, properties, clock, PeerSource.none(), PullTracing.off());
  }
}
