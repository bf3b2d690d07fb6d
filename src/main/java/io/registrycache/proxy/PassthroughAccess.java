package io.registrycache.proxy;

import com.github.benmanes.caffeine.cache.Cache;
import com.github.benmanes.caffeine.cache.Caffeine;
import com.github.benmanes.caffeine.cache.Expiry;
import io.registrycache.config.RegistryCacheProperties;
import io.registrycache.metrics.CacheMetrics;
import io.registrycache.oci.Digest;
import io.registrycache.oci.MediaTypes;
import io.registrycache.oci.OciErrorCode;
import io.registrycache.oci.OciException;
import io.registrycache.oci.Reference;
import io.registrycache.oci.RepositoryName;
import io.registrycache.upstream.Upstream;
import io.registrycache.upstream.UpstreamClient;
import java.time.Duration;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import org.springframework.http.HttpStatus;
import org.springframework.stereotype.Service;
import reactor.core.publisher.Mono;

/**
 * A pass-through upstream's own word on a client ({@code
 * registry-cache.upstreams.<key>.credentials: passthrough}), asked by the pull port's one decision
 * ({@link io.registrycache.auth.PullAccess#decide}) and nothing else: before a client's request is
 * answered from the cache or joins a fill in flight (which another client's credentials may have
 * started), the upstream confirms, with this client's own credentials, that they may pull the
 * repository: a {@code HEAD} of the manifest (by the tag or digest asked for), of the blob (by
 * digest), or a one-entry tags list ({@code ?n=1}) for the tags and referrers endpoints. A
 * confirmation is remembered per (client credentials' {@link
 * io.registrycache.upstream.ClientCredential#id()}, upstream, repository) for {@code
 * confirm-access-for}; refusals are not remembered.
 *
 * <p>Only a 2xx confirms. Otherwise the upstream's answer is the client's: 401 {@code UNAUTHORIZED}
 * (wrong or no credentials), 403 {@code DENIED}, 404 {@code MANIFEST_UNKNOWN} / {@code
 * BLOB_UNKNOWN} / {@code NAME_UNKNOWN}, 429, or 502/503/504 when the upstream cannot be asked (fail
 * closed: nothing cached is served to a client whose access is not confirmed). Offline ({@code
 * registry-cache.offline}), a client not confirmed before is refused with 403 {@code DENIED}.
 *
 * <p>Concurrent confirmations of one key share one {@code HEAD} ({@link SingleFlight}). Requests to
 * an upstream fetched with the cache's credentials pass at once. Each {@code HEAD} is counted in
 * {@code registry_cache_passthrough_checks_total{upstream,outcome}}.
 */
@Service
public class PassthroughAccess {

  private static final Logger log = LoggerFactory.getLogger(PassthroughAccess.class);

  /** What a request reads, which decides the {@code HEAD} that confirms access. */
  public sealed interface Probe {
    /** A manifest by tag or digest: {@code HEAD /v2/<name>/manifests/<reference>}. */
    record Manifest(Reference reference) implements Probe {}

    /** A blob: {@code HEAD /v2/<name>/blobs/<digest>}. */
    record Blob(Digest digest) implements Probe {}

    /** The tags list or referrers: {@code GET /v2/<name>/tags/list?n=1}. */
    record Repository() implements Probe {}
  }

  private final UpstreamClient upstreams;
  private final boolean offline;

  /** Confirmed (client id | upstream key | repository) → how long it is remembered. */
  private final Cache<String, Duration> confirmed =
      Caffeine.newBuilder()
          .maximumSize(100_000)
          .expireAfter(Expiry.<String, Duration>creating((key, remember) -> remember))
          .build();

  private final SingleFlight<String, Mono<Boolean>> confirming = new SingleFlight<>();

  private final CacheMetrics metrics;

  public PassthroughAccess(
      UpstreamClient upstreams, RegistryCacheProperties properties, CacheMetrics metrics) {
    this.upstreams = upstreams;
    this.offline = properties.upstreams().offline();
    this.metrics = metrics;
  }

  /**
   * Completes empty once the client whose credentials {@code upstream} carries ({@link
   * Upstream#forClient}) may be served {@code name} of it: at once for an upstream that is not
   * pass-through or a confirmation remembered, else after the upstream's {@code HEAD}.
   *
   * @param name the canonical repository name
   * @return errors with the upstream's refusal or failure, as the class says
   */
  public Mono<Void> confirm(Upstream upstream, RepositoryName name, Probe probe) {
    if (!upstream.passthrough()) {
      return Mono.empty();
    }
    String key = upstream.clientCredential().id() + "|" + upstream.key() + "|" + name.value();
    if (confirmed.getIfPresent(key) != null) {
      return Mono.empty();
    }
    if (offline) {
      return Mono.error(
          new OciException(
              OciErrorCode.DENIED,
              HttpStatus.FORBIDDEN,
              "the cache is offline: access to '"
                  + name
                  + "' of pass-through upstream '"
                  + upstream.key()
                  + "' cannot be confirmed"));
    }
    // The key names the client credentials (an HMAC), so clients never share a confirmation.
    return SingleFlight.shared(
            confirming,
            key,
            () ->
                ask(upstream, name, probe)
                    .thenReturn(Boolean.TRUE)
                    .doOnSuccess(ok -> metrics.passthroughCheck(upstream.key(), "confirmed"))
                    .doOnError(
                        e ->
                            metrics.passthroughCheck(
                                upstream.key(),
                                e instanceof OciException oci && oci.status().is4xxClientError()
                                    ? "refused"
                                    : "failed")))
        .doOnNext(
            ok -> {
              Duration remember = upstream.settings().confirmAccessFor();
              if (!remember.isZero()) {
                confirmed.put(key, remember);
              }
              log.debug(
                  "upstream '{}' confirmed {} may pull {}",
                  upstream.key(),
                  upstream.clientCredential(),
                  name);
            })
        .then();
  }

  private Mono<?> ask(Upstream upstream, RepositoryName name, Probe probe) {
    if (probe instanceof Probe.Manifest m) {
      return upstreams.headManifest(upstream, name, m.reference(), MediaTypes.ALL_MANIFESTS);
    }
    if (probe instanceof Probe.Blob b) {
      return upstreams.headBlob(upstream, name, b.digest());
    }
    return upstreams.listTags(upstream, name, 1, null);
  }

  /** Forgets every confirmation (for tests and operators' use). */
  public void forgetAll() {
    confirmed.invalidateAll();
  }
}
