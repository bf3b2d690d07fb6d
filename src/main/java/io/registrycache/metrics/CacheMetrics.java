package io.registrycache.metrics;

import io.micrometer.core.instrument.Counter;
import io.micrometer.core.instrument.Gauge;
import io.micrometer.core.instrument.MeterRegistry;
import io.registrycache.config.RegistryCacheProperties;
import java.util.Locale;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ConcurrentMap;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicReferenceArray;
import org.springframework.stereotype.Component;

/**
 * The cache's own metrics, exported at {@code /actuator/prometheus} on the management port:
 *
 * <ul>
 *   <li>{@code registry_cache_requests_total{kind,result,upstream}} — kind {@code
 *       manifest|blob|tags}, result {@code hit|miss|stale|error}
 *   <li>{@code registry_cache_served_bytes_total{source}} — source {@code cache} (from a stored
 *       file) or {@code upstream} (streamed while downloading)
 *   <li>{@code registry_cache_inflight_fetches} — upstream fetches (manifests and blobs) in flight
 *   <li>{@code registry_cache_stale_served_total{upstream,reason}} — cached tags served because the
 *       upstream failed or rate-limited
 *   <li>{@code registry_cache_responses_total{status}} — answers to {@code /v2} requests on the
 *       pull port by HTTP status code (recorded by {@link ResponseStatusFilter}; stands in for
 *       Spring's {@code http_server_requests}, whose per-request observation is switched off)
 *   <li>{@code registry_cache_storage_budget_bytes} — the disk budget ({@code storage.max-bytes}; 0
 *       = unlimited)
 *   <li>{@code registry_cache_prefetch_blobs_total{upstream}}, {@code
 *       registry_cache_prefetch_bytes_total{upstream}} — blobs (and their bytes) fetched because a
 *       manifest referencing them arrived ({@code blobs.prefetch}); {@code
 *       registry_cache_prefetch_hits_total{upstream}} — client blob requests that found such a
 *       fetch running or its blob stored and not yet asked for; {@code
 *       registry_cache_prefetch_unrequested_bytes_total{upstream}} — bytes prefetched that no
 *       client asked for within {@code blobs.prefetch.unrequested-after}
 *   <li>{@code registry_cache_passthrough_checks_total{upstream,outcome}} — confirmations of a
 *       client's own credentials by a pass-through upstream, outcome {@code
 *       confirmed|refused|failed}
 *   <li>{@code registry_cache_identity_requests_total{identity}} — requests on the pull port by who
 *       made them, with {@code registry-cache.auth.enabled}: {@code identity} is a robot's {@code
 *       robot:<name>}, or {@code user} for every user, or {@code anonymous} (bounded by the tokens
 *       file, never one series per person)
 * </ul>
 *
 * The stores' own figures (stored items and bytes, evictions) are bound by {@code
 * storage.StorageMetrics}. Upstream latency ({@code registry_cache_upstream_request_seconds}) and
 * fetched bytes ({@code registry_cache_upstream_fetched_bytes_total}) are recorded by the upstream
 * client.
 */
@Component
public class CacheMetrics {

  /** What a request was. */
  public enum Kind {
    MANIFEST,
    BLOB,
    TAGS,
    REFERRERS
  }

  /** How the cache answered it. */
  public enum Result {
    HIT,
    MISS,
    STALE,
    ERROR
  }

  private final MeterRegistry registry;
  private final AtomicInteger inFlightFetches = new AtomicInteger();
  private final Counter servedFromCache;
  private final Counter servedFromUpstream;

  /** Request counters by kind, result and upstream: looked up once, not rebuilt per request. */
  private final ConcurrentMap<RequestKey, Counter> requests = new ConcurrentHashMap<>();

  private final ConcurrentMap<String, Counter> prefetch = new ConcurrentHashMap<>();
  private final ConcurrentMap<String, Counter> identityRequests = new ConcurrentHashMap<>();

  private record RequestKey(Kind kind, Result result, String upstream) {}

  /** Response counters by status code (100..599), registered on first use. */
  private final AtomicReferenceArray<Counter> responses = new AtomicReferenceArray<>(600);

  public CacheMetrics(MeterRegistry registry, RegistryCacheProperties properties) {
    this.registry = registry;
    long budget = properties.storage().maxBytes();
    Gauge.builder("registry.cache.storage.budget.bytes", () -> budget)
        .baseUnit("bytes")
        .description("Disk budget for stored blobs and manifests; 0 = unlimited")
        .register(registry);
    this.servedFromCache =
        Counter.builder("registry.cache.served.bytes")
            .baseUnit("bytes")
            .description("Bytes of manifests and blobs sent to clients")
            .tag("source", "cache")
            .register(registry);
    this.servedFromUpstream =
        Counter.builder("registry.cache.served.bytes")
            .baseUnit("bytes")
            .description("Bytes of manifests and blobs sent to clients")
            .tag("source", "upstream")
            .register(registry);
    Gauge.builder("registry.cache.inflight.fetches", inFlightFetches, AtomicInteger::get)
        .description("Upstream fetches of manifests and blobs in flight")
        .register(registry);
  }

  /** Counts one client request. */
  public void request(Kind kind, Result result, String upstream) {
    requests
        .computeIfAbsent(
            new RequestKey(kind, result, upstream == null ? "none" : upstream),
            this::requestCounter)
        .increment();
  }

  private Counter requestCounter(RequestKey key) {
    return registry.counter(
        "registry.cache.requests",
        "kind",
        key.kind().name().toLowerCase(Locale.ROOT),
        "result",
        key.result().name().toLowerCase(Locale.ROOT),
        "upstream",
        key.upstream());
  }

  /**
   * Counts one authenticated request by its identity's label: {@code robot:<name>}, {@code user} or
   * {@code anonymous} (the caller keeps the set bounded).
   */
  public void identityRequest(String identity) {
    identityRequests
        .computeIfAbsent(
            identity,
            i ->
                Counter.builder("registry.cache.identity.requests")
                    .description(
                        "Requests on the pull port by identity: robot:<name>, user or anonymous")
                    .tag("identity", i)
                    .register(registry))
        .increment();
  }

  /** Counts one answer to a {@code /v2} request with HTTP status {@code status} (100..599). */
  public void response(int status) {
    if (status < 100 || status > 599) {
      return;
    }
    Counter c = responses.get(status);
    if (c == null) {
      c =
          Counter.builder("registry.cache.responses")
              .description("Answers to /v2 requests on the pull port, by HTTP status code")
              .tag("status", Integer.toString(status))
              .register(registry);
      responses.set(status, c);
    }
    c.increment();
  }

  /** Counts a cached tag served because the upstream failed or rate-limited. */
  public void staleServed(String upstream, String reason) {
    registry
        .counter("registry.cache.stale.served", "upstream", upstream, "reason", reason)
        .increment();
  }

  /** Counts bytes sent to a client. */
  public void served(boolean fromCache, long bytes) {
    (fromCache ? servedFromCache : servedFromUpstream).increment((double) bytes);
  }

  /** A blob fetched by prefetch was stored: {@code bytes} bytes. */
  public void prefetched(String upstream, long bytes) {
    prefetchCounter("registry.cache.prefetch.blobs", upstream, "Blobs prefetched on manifest", null)
        .increment();
    prefetchCounter(
            "registry.cache.prefetch.bytes",
            upstream,
            "Bytes of blobs prefetched on manifest",
            "bytes")
        .increment((double) bytes);
  }

  /**
   * A client's blob request found a prefetch of it running, or a prefetched blob no client had
   * asked for yet.
   */
  public void prefetchHit(String upstream) {
    prefetchCounter(
            "registry.cache.prefetch.hits",
            upstream,
            "Client blob requests that found a prefetch",
            null)
        .increment();
  }

  /**
   * A prefetched blob of {@code bytes} bytes that no client asked for within {@code
   * blobs.prefetch.unrequested-after}.
   */
  public void prefetchUnrequested(String upstream, long bytes) {
    prefetchCounter(
            "registry.cache.prefetch.unrequested.bytes",
            upstream,
            "Bytes prefetched that no client asked for in time",
            "bytes")
        .increment((double) bytes);
  }

  private Counter prefetchCounter(String name, String upstream, String description, String unit) {
    return prefetch.computeIfAbsent(
        name + "|" + upstream,
        k ->
            Counter.builder(name)
                .description(description)
                .baseUnit(unit)
                .tag("upstream", upstream)
                .register(registry));
  }

  /**
   * One confirmation {@code HEAD} of credential pass-through ({@code proxy.PassthroughAccess}):
   * {@code outcome} is {@code confirmed} (2xx), {@code refused} (the upstream's 4xx) or {@code
   * failed} (the upstream could not be asked); remembered confirmations are not counted.
   */
  public void passthroughCheck(String upstream, String outcome) {
    prefetch
        .computeIfAbsent(
            "registry.cache.passthrough.checks|" + upstream + "|" + outcome,
            k ->
                Counter.builder("registry.cache.passthrough.checks")
                    .description(
                        "Upstream confirmations of a client's own credentials (credentials: passthrough)")
                    .tag("upstream", upstream)
                    .tag("outcome", outcome)
                    .register(registry))
        .increment();
  }

  /** Tracks an upstream fetch (manifest or blob) in flight: +1 at its start, -1 at its end. */
  public void fetchInFlight(int delta) {
    inFlightFetches.addAndGet(delta);
  }
}
