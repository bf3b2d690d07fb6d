package io.registrycache.config;

import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import org.springframework.boot.context.properties.bind.DefaultValue;
import org.springframework.util.unit.DataSize;

/**
 * One upstream registry, {@code registry-cache.upstreams.<key>.*} (README, "Configuration";
 * docs/resilience.md; docs/security.md).
 *
 * @param host registry host name as clients name it in {@code ns=} and in-path requests, e.g.
 *     {@code registry.example.com} or {@code localhost:5000}
 * @param url base URL the cache fetches from, http or https
 * @param aliases other host names that mean the same upstream and share its cache entries
 * @param dockerHubNaming Docker Hub naming rules: a single-component name gets the {@code library/}
 *     prefix; default false
 * @param username user name for the upstream; with {@code password} or {@code password-file}
 * @param password password or token; prefer {@code password-file} or an environment variable; never
 *     logged
 * @param passwordFile file holding the password (trailing newline ignored)
 * @param dockerConfigCredentials whether to look up credentials the way Docker does (config.json,
 *     credential helpers) when no username is configured; default false
 * @param tls TLS settings for https upstreams
 * @param connectTimeout TCP connect timeout; default 5 s
 * @param readTimeout time allowed for the response headers and then between two chunks of a body;
 *     default 30 s
 * @param maxConcurrentRequests upper bound on requests in flight to this upstream; default 64
 * @param retry retries of idempotent requests after transient failures
 * @param circuitBreaker the circuit breaker of this upstream
 * @param redirect where redirects and token realms of this upstream may lead, besides its origin
 * @param sendCredentialsOverHttp whether configured credentials may be sent over plain http to a
 *     token realm on another origin than {@code url}; default false (only over https)
 * @param minTransferRate slowest average transfer rate accepted for a response body, in bytes per
 *     second, measured from the response headers on; a slower body fails with 504; 0 turns the
 *     check off; default 1 KB
 * @param minTransferRateGrace how long a body may stay below {@code min-transfer-rate} at its start
 *     before it fails; default 30 s
 * @param pullThrough which repositories of this upstream the cache serves at all; default all
 * @param credentials whose credentials the upstream is fetched with: {@code cache} (the configured
 *     {@code username} / {@code password}, Docker config, or none) or {@code passthrough} (each
 *     client's own, see {@link Credentials}); default {@code cache}
 * @param confirmAccessFor with {@code credentials: passthrough}, how long the upstream's
 *     confirmation that a client's credentials may pull a repository is remembered (per client
 *     credentials, upstream and repository) before it is asked again; default 5 minutes
 */
public record UpstreamProperties(
    String host,
    String url,
    @DefaultValue List<String> aliases,
    @DefaultValue("false") boolean dockerHubNaming,
    String username,
    String password,
    Path passwordFile,
    @DefaultValue("false") boolean dockerConfigCredentials,
    @DefaultValue Tls tls,
    @DefaultValue("5s") Duration connectTimeout,
    @DefaultValue("30s") Duration readTimeout,
    @DefaultValue("64") int maxConcurrentRequests,
    @DefaultValue Retry retry,
    @DefaultValue CircuitBreaker circuitBreaker,
    @DefaultValue Redirect redirect,
    @DefaultValue("false") boolean sendCredentialsOverHttp,
    @DefaultValue("1KB") DataSize minTransferRate,
    @DefaultValue("30s") Duration minTransferRateGrace,
    @DefaultValue PullThrough pullThrough,
    @DefaultValue("cache") Credentials credentials,
    @DefaultValue("5m") Duration confirmAccessFor) {

  public UpstreamProperties {
    aliases = List.copyOf(aliases);
    if (confirmAccessFor.isNegative()) {
      throw new IllegalArgumentException(
          "registry-cache.upstreams.*.confirm-access-for must not be negative");
    }
    if (credentials == Credentials.PASSTHROUGH
        && (username != null
            || password != null
            || passwordFile != null
            || dockerConfigCredentials)) {
      throw new IllegalArgumentException(
          "registry-cache.upstreams.*.credentials=passthrough uses each client's "
              + "credentials: username, password, password-file and docker-config-credentials must not be set with it");
    }
  }

  /**
   * Whether this upstream is fetched with each client's own credentials ({@code credentials:
   * passthrough}).
   */
  public boolean passthrough() {
    return credentials == Credentials.PASSTHROUGH;
  }

  /**
   * Whose credentials an upstream is fetched with ({@code
   * registry-cache.upstreams.<key>.credentials}).
   */
  public enum Credentials {
    /**
     * The cache's own: {@code username} and {@code password(-file)}, Docker config, or anonymous.
     */
    CACHE,
    /**
     * Each client's own, as it gave them to the cache (HTTP Basic on the request, or the user name
     * and password it gave the cache's token endpoint); anonymous for a client without any. Held in
     * memory only, for as long as the request (or the token) lives; never logged or stored. Content
     * fetched with one client's credentials is served to another only once the upstream confirmed,
     * with that other client's credentials, that it may pull the repository.
     */
    PASSTHROUGH
  }

  /** This upstream at another {@code host} and {@code url}, every other setting kept. */
  public UpstreamProperties withHostAndUrl(String newHost, String newUrl) {
    return new UpstreamProperties(
        newHost,
        newUrl,
        aliases,
        dockerHubNaming,
        username,
        password,
        passwordFile,
        dockerConfigCredentials,
        tls,
        connectTimeout,
        readTimeout,
        maxConcurrentRequests,
        retry,
        circuitBreaker,
        redirect,
        sendCredentialsOverHttp,
        minTransferRate,
        minTransferRateGrace,
        pullThrough,
        credentials,
        confirmAccessFor);
  }

  @Override
  public String toString() {
    // Never print the password.
    return "Upstream[host="
        + host
        + ", url="
        + url
        + ", username="
        + username
        + (passthrough() ? ", credentials=passthrough" : "")
        + "]";
  }

  /**
   * Retry with exponential backoff and jitter (each delay varies by up to 50 %) for transient
   * upstream failures of idempotent requests; never for 4xx or 429, never in the middle of a body.
   *
   * @param maxAttempts attempts in all, the first included; 1 turns retries off; default 3
   * @param initialBackoff delay before the first retry, doubled for each further one; default 200
   *     ms
   * @param maxBackoff upper bound of one delay; a 503 whose {@code Retry-After} asks for longer is
   *     not retried; default 2 s
   */
  public record Retry(
      @DefaultValue("3") int maxAttempts,
      @DefaultValue("200ms") Duration initialBackoff,
      @DefaultValue("2s") Duration maxBackoff) {}

  /**
   * Circuit breaker of one upstream: opens when the failure rate over the last {@code
   * sliding-window-size} requests reaches {@code failure-rate-threshold}; while open, requests fail
   * at once with 503 (cached content is served stale without waiting for timeouts); after {@code
   * wait-in-open} a few trial requests decide whether it closes again.
   *
   * @param enabled whether the breaker is used at all; default true
   * @param failureRateThreshold failure rate in percent at which the breaker opens; default 50
   * @param slidingWindowSize how many of the most recent requests the rate is measured over;
   *     default 20
   * @param minimumNumberOfCalls fewest requests in the window before the rate counts; default 10
   * @param waitInOpen how long the breaker stays open before its first trial requests; each failed
   *     round of trials multiplies it by {@code wait-in-open-multiplier}, up to {@code
   *     max-wait-in-open}; default 2 s
   * @param waitInOpenMultiplier factor by which the wait grows after failed trials; default 2
   * @param maxWaitInOpen longest wait in the open state; default 60 s
   * @param permittedCallsInHalfOpen trial requests let through while half-open; default 3
   */
  public record CircuitBreaker(
      @DefaultValue("true") boolean enabled,
      @DefaultValue("50") float failureRateThreshold,
      @DefaultValue("20") int slidingWindowSize,
      @DefaultValue("10") int minimumNumberOfCalls,
      @DefaultValue("2s") Duration waitInOpen,
      @DefaultValue("2") double waitInOpenMultiplier,
      @DefaultValue("60s") Duration maxWaitInOpen,
      @DefaultValue("3") int permittedCallsInHalfOpen) {}

  /**
   * Redirect policy of one upstream. Its own origin (scheme, host, port of {@code url}) is always
   * allowed; any other host a redirect or token realm names is resolved and refused when it is
   * loopback, link-local, any-local, multicast or private unless listed in {@code allowed-hosts};
   * the cache's own ports are always refused.
   *
   * @param allowedHosts host names, IP addresses or CIDR ranges that may be reached although
   *     private or local; default none
   * @param maxHops most redirects followed for one request; default 5
   */
  public record Redirect(@DefaultValue List<String> allowedHosts, @DefaultValue("5") int maxHops) {
    public Redirect {
      allowedHosts = List.copyOf(allowedHosts);
    }
  }

  /**
   * TLS for an https upstream.
   *
   * @param caFile PEM file of CA certificates to trust in addition to the JVM's
   * @param certFile PEM client certificate (chain) for mutual TLS
   * @param keyFile PEM PKCS#8 private key of the client certificate
   * @param insecureSkipVerify skip certificate verification; insecure, for test setups only;
   *     default false
   */
  public record Tls(
      Path caFile,
      Path certFile,
      Path keyFile,
      @DefaultValue("false") boolean insecureSkipVerify) {}

  /**
   * Which repositories of this upstream are pulled through (and served from the cache) at all,
   * whoever asks: a name is served when {@code allow} is empty or one of its patterns matches, and
   * no pattern of {@code deny} matches (deny wins). A refused name is answered 404 {@code
   * NAME_UNKNOWN} (as a registry answers a repository it does not hold) before anything is looked
   * up or requested from the upstream; preloads of it fail the same way. Patterns: {@link
   * RepositoryGlob}, against the canonical name (Docker Hub's {@code library/} applied).
   *
   * @param allow repository patterns served; default empty (all)
   * @param deny repository patterns never served; default empty (none)
   */
  public record PullThrough(
      @DefaultValue List<RepositoryGlob> allow, @DefaultValue List<RepositoryGlob> deny) {
    public PullThrough {
      allow = List.copyOf(allow);
      deny = List.copyOf(deny);
    }

    /** Whether {@code repository} (canonical) may be pulled through. */
    public boolean permits(String repository) {
      return (allow.isEmpty() || RepositoryGlob.anyMatches(allow, repository))
          && !RepositoryGlob.anyMatches(deny, repository);
    }
  }
}
