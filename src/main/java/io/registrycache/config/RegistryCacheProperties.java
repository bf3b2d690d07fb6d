package io.registrycache.config;

import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import org.springframework.boot.context.properties.ConfigurationProperties;

/**
 * Everything an operator sets, under the prefix {@code registry-cache}. Every property can be set
 * by an environment variable in Spring Boot's canonical form, e.g. {@code REGISTRYCACHE_STORAGE_PATH}
 * or {@code REGISTRYCACHE_UPSTREAMS_LOCAL_URL}; upstream keys that appear only in the environment
 * are found only in that form (dashes dropped), not as {@code REGISTRY_CACHE_UPSTREAMS_...}.
 * Defaults are those of {@code application.yml}.
 */
@ConfigurationProperties(prefix = "registry-cache")
public class RegistryCacheProperties {

  /** Where manifests, tags and blobs are kept on disk. */
  private Storage storage = new Storage();

  /** Manifest limits and caching. */
  private Manifests manifests = new Manifests();

  /** Blob download behaviour. */
  private Blobs blobs = new Blobs();

  /** Referrers API settings ({@code GET /v2/<name>/referrers/<digest>}). */
  private Referrers referrers = new Referrers();

  /** Scheduled pruning; off by default. */
  private Prune prune = new Prune();

  /** The structured access log; off by default. */
  private AccessLog accessLog = new AccessLog();

  /** Preloading images into the cache: a file read after start-up, and the admin API's jobs. */
  private Preload preload = new Preload();

  /** The management port's admin API: authentication and input limits (docs/security.md). */
  private Admin admin = new Admin();

  /** Key of the upstream that serves bare-form requests ({@code /v2/<name>/...}). */
  private String defaultUpstream = "local";

  /**
   * Whether a registry host that is not configured may be used (as {@code https://<host>},
   * anonymous). Off by default: the cache is not an open proxy.
   */
  private boolean allowAnyUpstream = false;

  /** Upstream registries by key. */
  private Map<String, Upstream> upstreams = new LinkedHashMap<>();

  /**
   * Air-gapped mode: no upstream is ever contacted. What is cached is served (tags without
   * revalidation); everything else is {@code MANIFEST_UNKNOWN} / {@code BLOB_UNKNOWN}.
   */
  private boolean offline = false;

  public Admin getAdmin() {
    return admin;
  }

  public void setAdmin(Admin admin) {
    this.admin = admin;
  }

  public Prune getPrune() {
    return prune;
  }

  public void setPrune(Prune prune) {
    this.prune = prune;
  }

  public Preload getPreload() {
    return preload;
  }

  public void setPreload(Preload preload) {
    this.preload = preload;
  }

  public AccessLog getAccessLog() {
    return accessLog;
  }

  public void setAccessLog(AccessLog accessLog) {
    this.accessLog = accessLog;
  }

  public boolean isOffline() {
    return offline;
  }

  public void setOffline(boolean offline) {
    this.offline = offline;
  }

  public Storage getStorage() {
    return storage;
  }

  public void setStorage(Storage storage) {
    this.storage = storage;
  }

  public Manifests getManifests() {
    return manifests;
  }

  public void setManifests(Manifests manifests) {
    this.manifests = manifests;
  }

  public Referrers getReferrers() {
    return referrers;
  }

  public void setReferrers(Referrers referrers) {
    this.referrers = referrers;
  }

  public Blobs getBlobs() {
    return blobs;
  }

  public void setBlobs(Blobs blobs) {
    this.blobs = blobs;
  }

  public String getDefaultUpstream() {
    return defaultUpstream;
  }

  public void setDefaultUpstream(String defaultUpstream) {
    this.defaultUpstream = defaultUpstream;
  }

  public boolean isAllowAnyUpstream() {
    return allowAnyUpstream;
  }

  public void setAllowAnyUpstream(boolean allowAnyUpstream) {
    this.allowAnyUpstream = allowAnyUpstream;
  }

  public Map<String, Upstream> getUpstreams() {
    return upstreams;
  }

  public void setUpstreams(Map<String, Upstream> upstreams) {
    this.upstreams = upstreams;
  }

  /** On-disk storage. */
  public static class Storage {
    /** Root folder of the cache; created when missing. */
    private Path path = Path.of("data");

    /**
     * Disk budget in bytes for stored blobs and manifests; 0 means unlimited (no eviction). Blob
     * downloads in flight and files waiting out {@code delete-grace} are not counted.
     */
    private long maxBytes = 0;

    /** Fraction of {@code max-bytes} above which the least recently pulled content is evicted. */
    private double highWatermark = 0.90;

    /** Fraction of {@code max-bytes} that eviction brings the stored bytes down to. */
    private double lowWatermark = 0.80;

    /**
     * How often the storage janitor runs: checks the budget and records access times on disk. It
     * also runs as soon as a stored blob takes the cache over the high watermark.
     */
    private Duration janitorInterval = Duration.ofSeconds(30);

    /** How many items the janitor evicts before it measures again. */
    private int evictionBatchSize = 100;

    /**
     * How long an evicted blob's file stays on disk after it left the index, so that a request
     * that looked it up just before can still open it. Once open, deleting it is harmless (Linux
     * keeps the inode until the reader closes it).
     */
    private Duration deleteGrace = Duration.ofSeconds(30);

    /**
     * Where a stored blob or manifest may be served by digest: {@code repository} (only in a
     * repository it was fetched for, or that its upstream confirmed), {@code upstream} (in any
     * repository of an upstream it was fetched from), {@code shared} (anywhere). Bytes are stored
     * once whatever the scope. See docs/security.md.
     */
    private ContentScope contentScope = ContentScope.REPOSITORY;

    public ContentScope getContentScope() {
      return contentScope;
    }

    public void setContentScope(ContentScope contentScope) {
      this.contentScope = contentScope;
    }

    public Path getPath() {
      return path;
    }

    public void setPath(Path path) {
      this.path = path;
    }

    public long getMaxBytes() {
      return maxBytes;
    }

    public void setMaxBytes(long maxBytes) {
      this.maxBytes = maxBytes;
    }

    public double getHighWatermark() {
      return highWatermark;
    }

    public void setHighWatermark(double highWatermark) {
      this.highWatermark = highWatermark;
    }

    public double getLowWatermark() {
      return lowWatermark;
    }

    public void setLowWatermark(double lowWatermark) {
      this.lowWatermark = lowWatermark;
    }

    public Duration getJanitorInterval() {
      return janitorInterval;
    }

    public void setJanitorInterval(Duration janitorInterval) {
      this.janitorInterval = janitorInterval;
    }

    public int getEvictionBatchSize() {
      return evictionBatchSize;
    }

    public void setEvictionBatchSize(int evictionBatchSize) {
      this.evictionBatchSize = evictionBatchSize;
    }

    public Duration getDeleteGrace() {
      return deleteGrace;
    }

    public void setDeleteGrace(Duration deleteGrace) {
      this.deleteGrace = deleteGrace;
    }
  }

  /** Where stored content may be served by digest ({@code storage.content-scope}). */
  public enum ContentScope {
    /** Only in a repository (of an upstream) the content was fetched for or confirmed in. */
    REPOSITORY,
    /** In any repository of an upstream the content was fetched from. */
    UPSTREAM,
    /** Anywhere: cross-upstream dedupe, no boundary. */
    SHARED
  }

  /** Scheduled pruning: what goes, how often. Off while {@code schedule} is not set. */
  public static class Prune {
    /** Interval between two scheduled prunes, e.g. {@code 1h}; unset means never. */
    private Duration schedule;

    /**
     * Keep what was pulled within this duration, e.g. {@code 14d}: tags whose manifest was last
     * pulled longer ago are removed, with the content only they used.
     */
    private Duration keepPulledWithin;

    /** Keep at most this many most recently pulled tags per repository; 0 means no limit. */
    private int keepPerRepository = 0;

    public Duration getSchedule() {
      return schedule;
    }

    public void setSchedule(Duration schedule) {
      this.schedule = schedule;
    }

    public Duration getKeepPulledWithin() {
      return keepPulledWithin;
    }

    public void setKeepPulledWithin(Duration keepPulledWithin) {
      this.keepPulledWithin = keepPulledWithin;
    }

    public int getKeepPerRepository() {
      return keepPerRepository;
    }

    public void setKeepPerRepository(int keepPerRepository) {
      this.keepPerRepository = keepPerRepository;
    }
  }

  /**
   * The management port's protection. With a token set (inline or from a file), every actuator
   * request but {@code health} (and {@code prometheus} when {@link #isPublicPrometheus()}) must
   * carry {@code Authorization: Bearer <token>}; without one, those requests are answered only
   * for loopback clients (403 otherwise), so a local {@code ./mvnw spring-boot:run} works as is.
   */
  public static class Admin {
    /** The bearer token itself, e.g. from an environment variable; never logged. Empty = none. */
    private String token = "";

    /** A file holding the bearer token (a mounted Secret); surrounding white space is ignored. */
    private Path tokenFile;

    /** Whether {@code /actuator/prometheus} is open without the token (scrapers). */
    private boolean publicPrometheus = true;

    /** Longest {@code filter} / {@code pattern} regular expression accepted, in characters. */
    private int maxPatternLength = 256;

    public String getToken() {
      return token;
    }

    public void setToken(String token) {
      this.token = token;
    }

    public Path getTokenFile() {
      return tokenFile;
    }

    public void setTokenFile(Path tokenFile) {
      this.tokenFile = tokenFile;
    }

    public boolean isPublicPrometheus() {
      return publicPrometheus;
    }

    public void setPublicPrometheus(boolean publicPrometheus) {
      this.publicPrometheus = publicPrometheus;
    }

    public int getMaxPatternLength() {
      return maxPatternLength;
    }

    public void setMaxPatternLength(int maxPatternLength) {
      this.maxPatternLength = maxPatternLength;
    }
  }

  /** The access log: one line per {@code /v2} request on the logger {@code registry-cache.access}. */
  public static class AccessLog {
    /** Whether to write it. */
    private boolean enabled = false;

    public boolean isEnabled() {
      return enabled;
    }

    public void setEnabled(boolean enabled) {
      this.enabled = enabled;
    }
  }

  /**
   * Preloading: pulling images into the cache before any client asks, through the same pull-through
   * path as clients (same verification, same storage).
   */
  public static class Preload {
    /**
     * File of image references to preload after start-up, one per line ({@code
     * registry.example.com/team/app:v1}, {@code team/app@sha256:...}); {@code #} starts a comment.
     * Read in the background once the service is ready; unset = nothing is preloaded at start-up.
     */
    private Path file;

    /**
     * Platforms ({@code os/architecture[/variant]}, e.g. {@code linux/amd64}) to take from an image
     * index when preloading the file; empty = every platform of the index.
     */
    private List<String> platforms = new ArrayList<>();

    /** How many images are preloaded at once; the blobs of one image are fetched one after another. */
    private int concurrency = 3;

    /** Whether preloading an image also preloads its referrers (signatures, SBOMs) and their blobs. */
    private boolean includeReferrers = false;

    public boolean isIncludeReferrers() {
      return includeReferrers;
    }

    public void setIncludeReferrers(boolean includeReferrers) {
      this.includeReferrers = includeReferrers;
    }

    public Path getFile() {
      return file;
    }

    public void setFile(Path file) {
      this.file = file;
    }

    public List<String> getPlatforms() {
      return platforms;
    }

    public void setPlatforms(List<String> platforms) {
      this.platforms = platforms;
    }

    public int getConcurrency() {
      return concurrency;
    }

    public void setConcurrency(int concurrency) {
      this.concurrency = concurrency;
    }
  }

  /** Manifest settings. */
  public static class Manifests {
    /** Upper bound of the in-memory manifest cache, in bytes of manifest bodies. */
    private long memoryMaxBytes = 64L * 1024 * 1024;

    /** Largest manifest accepted from an upstream, in bytes (the spec suggests 4 MiB). */
    private int maxSizeBytes = 4 * 1024 * 1024;

    /** How long a cached tag is served before it is revalidated with a HEAD to the upstream. */
    private Duration tagTtl = Duration.ofMinutes(5);

    /**
     * Most tags a repository's tag list may have: the whole list is fetched from the upstream to be
     * sorted and paged, so beyond this the listing fails rather than hold an unbounded list.
     */
    private int tagListMaxTags = 100_000;

    public int getTagListMaxTags() {
      return tagListMaxTags;
    }

    public void setTagListMaxTags(int tagListMaxTags) {
      this.tagListMaxTags = tagListMaxTags;
    }

    public long getMemoryMaxBytes() {
      return memoryMaxBytes;
    }

    public void setMemoryMaxBytes(long memoryMaxBytes) {
      this.memoryMaxBytes = memoryMaxBytes;
    }

    public int getMaxSizeBytes() {
      return maxSizeBytes;
    }

    public void setMaxSizeBytes(int maxSizeBytes) {
      this.maxSizeBytes = maxSizeBytes;
    }

    public Duration getTagTtl() {
      return tagTtl;
    }

    public void setTagTtl(Duration tagTtl) {
      this.tagTtl = tagTtl;
    }
  }

  /** Referrers API settings (OCI Distribution Spec v1.1, "Listing Referrers"). */
  public static class Referrers {
    /**
     * How long a referrers list from an upstream is served before it is asked again; short, so
     * new signatures appear. Past it, a failing upstream still gets the cached list.
     */
    private Duration ttl = Duration.ofSeconds(60);

    /** Descriptors per response page; longer lists get a {@code Link: <...>; rel="next"}. */
    private int pageSize = 100;

    public Duration getTtl() {
      return ttl;
    }

    public void setTtl(Duration ttl) {
      this.ttl = ttl;
    }

    public int getPageSize() {
      return pageSize;
    }

    public void setPageSize(int pageSize) {
      this.pageSize = pageSize;
    }
  }

  /** Blob settings. */
  public static class Blobs {
    /**
     * How long a blob download goes on after every client that asked for it went away, so that
     * the next pull is a hit.
     */
    private Duration orphanDownloadTimeout = Duration.ofMinutes(10);

    public Duration getOrphanDownloadTimeout() {
      return orphanDownloadTimeout;
    }

    public void setOrphanDownloadTimeout(Duration orphanDownloadTimeout) {
      this.orphanDownloadTimeout = orphanDownloadTimeout;
    }
  }

  /** One upstream registry. */
  public static class Upstream {
    /**
     * Registry host name as clients name it in {@code ns=} and in-path requests, e.g.
     * {@code registry.example.com} or {@code localhost:5000}.
     */
    private String host;

    /** Base URL the cache fetches from, http or https, e.g. {@code https://registry.example.com}. */
    private String url;

    /** Other host names that mean the same upstream and share its cache entries. */
    private List<String> aliases = new ArrayList<>();

    /**
     * Docker Hub naming rules: a single-component name gets the {@code library/} prefix, so
     * {@code alpine} and {@code library/alpine} are one cache entry.
     */
    private boolean dockerHubNaming = false;

    /** User name for the upstream; with {@code password} or {@code password-file}. */
    private String username;

    /** Password or token; prefer {@code password-file} or an environment variable. Never logged. */
    private String password;

    /** File holding the password (trailing newline ignored). */
    private Path passwordFile;

    /**
     * Whether to look up credentials the way Docker does (config.json, credential helpers) when no
     * username is configured.
     */
    private boolean dockerConfigCredentials = false;

    /** TLS settings for https upstreams. */
    private Tls tls = new Tls();

    /** TCP connect timeout. */
    private Duration connectTimeout = Duration.ofSeconds(5);

    /** Time allowed for the response headers and then between two chunks of a body. */
    private Duration readTimeout = Duration.ofSeconds(30);

    /** Upper bound on requests in flight to this upstream at once. */
    private int maxConcurrentRequests = 64;

    /**
     * Retries of idempotent requests after transient failures (refused or reset connections,
     * connect timeouts, 502/503/504). See {@code docs/resilience.md}.
     */
    private Retry retry = new Retry();

    /** The circuit breaker of this upstream. See {@code docs/resilience.md}. */
    private CircuitBreaker circuitBreaker = new CircuitBreaker();

    /**
     * Where redirects (and token realms) of this upstream may lead, besides its own origin. See
     * {@code docs/security.md}.
     */
    private Redirect redirect = new Redirect();

    /**
     * Whether configured credentials may be sent over plain http to a token realm on another
     * origin than {@code url}. Off: only over https (the upstream's own origin is always allowed).
     */
    private boolean sendCredentialsOverHttp = false;

    /**
     * Slowest average transfer rate accepted for a response body, in bytes per second, measured
     * from the response headers on; a slower body fails with 504. 0 turns the check off.
     */
    private org.springframework.util.unit.DataSize minTransferRate =
        org.springframework.util.unit.DataSize.ofKilobytes(1);

    /** How long a body may stay below {@code min-transfer-rate} at its start before it fails. */
    private Duration minTransferRateGrace = Duration.ofSeconds(30);

    public String getHost() {
      return host;
    }

    public void setHost(String host) {
      this.host = host;
    }

    public String getUrl() {
      return url;
    }

    public void setUrl(String url) {
      this.url = url;
    }

    public List<String> getAliases() {
      return aliases;
    }

    public void setAliases(List<String> aliases) {
      this.aliases = aliases;
    }

    public boolean isDockerHubNaming() {
      return dockerHubNaming;
    }

    public void setDockerHubNaming(boolean dockerHubNaming) {
      this.dockerHubNaming = dockerHubNaming;
    }

    public String getUsername() {
      return username;
    }

    public void setUsername(String username) {
      this.username = username;
    }

    public String getPassword() {
      return password;
    }

    public void setPassword(String password) {
      this.password = password;
    }

    public Path getPasswordFile() {
      return passwordFile;
    }

    public void setPasswordFile(Path passwordFile) {
      this.passwordFile = passwordFile;
    }

    public boolean isDockerConfigCredentials() {
      return dockerConfigCredentials;
    }

    public void setDockerConfigCredentials(boolean dockerConfigCredentials) {
      this.dockerConfigCredentials = dockerConfigCredentials;
    }

    public Tls getTls() {
      return tls;
    }

    public void setTls(Tls tls) {
      this.tls = tls;
    }

    public Duration getConnectTimeout() {
      return connectTimeout;
    }

    public void setConnectTimeout(Duration connectTimeout) {
      this.connectTimeout = connectTimeout;
    }

    public Duration getReadTimeout() {
      return readTimeout;
    }

    public void setReadTimeout(Duration readTimeout) {
      this.readTimeout = readTimeout;
    }

    public int getMaxConcurrentRequests() {
      return maxConcurrentRequests;
    }

    public void setMaxConcurrentRequests(int maxConcurrentRequests) {
      this.maxConcurrentRequests = maxConcurrentRequests;
    }

    public Retry getRetry() {
      return retry;
    }

    public void setRetry(Retry retry) {
      this.retry = retry;
    }

    public CircuitBreaker getCircuitBreaker() {
      return circuitBreaker;
    }

    public void setCircuitBreaker(CircuitBreaker circuitBreaker) {
      this.circuitBreaker = circuitBreaker;
    }

    public Redirect getRedirect() {
      return redirect;
    }

    public void setRedirect(Redirect redirect) {
      this.redirect = redirect;
    }

    public boolean isSendCredentialsOverHttp() {
      return sendCredentialsOverHttp;
    }

    public void setSendCredentialsOverHttp(boolean sendCredentialsOverHttp) {
      this.sendCredentialsOverHttp = sendCredentialsOverHttp;
    }

    public org.springframework.util.unit.DataSize getMinTransferRate() {
      return minTransferRate;
    }

    public void setMinTransferRate(org.springframework.util.unit.DataSize minTransferRate) {
      this.minTransferRate = minTransferRate;
    }

    public Duration getMinTransferRateGrace() {
      return minTransferRateGrace;
    }

    public void setMinTransferRateGrace(Duration minTransferRateGrace) {
      this.minTransferRateGrace = minTransferRateGrace;
    }

    @Override
    public String toString() {
      // Never print the password.
      return "Upstream[host=" + host + ", url=" + url + ", username=" + username + "]";
    }
  }

  /**
   * Retry with exponential backoff and jitter (each delay varies by up to 50%) for transient
   * upstream failures of idempotent requests; never for 4xx or 429, never in the middle of a body.
   */
  public static class Retry {
    /** Attempts in all, the first included; 1 turns retries off. */
    private int maxAttempts = 3;

    /** Delay before the first retry; doubled for each further one. */
    private Duration initialBackoff = Duration.ofMillis(200);

    /**
     * Upper bound of one delay. A 503 whose {@code Retry-After} asks for longer is not retried.
     */
    private Duration maxBackoff = Duration.ofSeconds(2);

    public int getMaxAttempts() {
      return maxAttempts;
    }

    public void setMaxAttempts(int maxAttempts) {
      this.maxAttempts = maxAttempts;
    }

    public Duration getInitialBackoff() {
      return initialBackoff;
    }

    public void setInitialBackoff(Duration initialBackoff) {
      this.initialBackoff = initialBackoff;
    }

    public Duration getMaxBackoff() {
      return maxBackoff;
    }

    public void setMaxBackoff(Duration maxBackoff) {
      this.maxBackoff = maxBackoff;
    }
  }

  /**
   * Circuit breaker of one upstream: opens when the failure rate over the last {@code
   * sliding-window-size} requests reaches {@code failure-rate-threshold}; while open, requests fail
   * at once with 503 (so cached content is served stale without waiting for timeouts); after
   * {@code wait-in-open} a few trial requests decide whether it closes again.
   */
  public static class CircuitBreaker {
    /** Whether the breaker is used at all. */
    private boolean enabled = true;

    /** Failure rate in percent, over the sliding window, at which the breaker opens. */
    private float failureRateThreshold = 50;

    /** How many of the most recent requests the failure rate is measured over. */
    private int slidingWindowSize = 20;

    /** Fewest requests in the window before the failure rate counts. */
    private int minimumNumberOfCalls = 10;

    /**
     * How long the breaker stays open before it first lets trial requests through; each time the
     * trials fail it waits {@code wait-in-open-multiplier} times longer, up to {@code
     * max-wait-in-open}; closing starts again from {@code wait-in-open}.
     */
    private Duration waitInOpen = Duration.ofSeconds(2);

    /** Factor by which the wait grows after each failed round of trial requests. */
    private double waitInOpenMultiplier = 2;

    /** Longest wait in the open state. */
    private Duration maxWaitInOpen = Duration.ofSeconds(60);

    /** Trial requests let through while half-open; their outcome closes or reopens the breaker. */
    private int permittedCallsInHalfOpen = 3;

    public boolean isEnabled() {
      return enabled;
    }

    public void setEnabled(boolean enabled) {
      this.enabled = enabled;
    }

    public float getFailureRateThreshold() {
      return failureRateThreshold;
    }

    public void setFailureRateThreshold(float failureRateThreshold) {
      this.failureRateThreshold = failureRateThreshold;
    }

    public int getSlidingWindowSize() {
      return slidingWindowSize;
    }

    public void setSlidingWindowSize(int slidingWindowSize) {
      this.slidingWindowSize = slidingWindowSize;
    }

    public int getMinimumNumberOfCalls() {
      return minimumNumberOfCalls;
    }

    public void setMinimumNumberOfCalls(int minimumNumberOfCalls) {
      this.minimumNumberOfCalls = minimumNumberOfCalls;
    }

    public Duration getWaitInOpen() {
      return waitInOpen;
    }

    public void setWaitInOpen(Duration waitInOpen) {
      this.waitInOpen = waitInOpen;
    }

    public double getWaitInOpenMultiplier() {
      return waitInOpenMultiplier;
    }

    public void setWaitInOpenMultiplier(double waitInOpenMultiplier) {
      this.waitInOpenMultiplier = waitInOpenMultiplier;
    }

    public Duration getMaxWaitInOpen() {
      return maxWaitInOpen;
    }

    public void setMaxWaitInOpen(Duration maxWaitInOpen) {
      this.maxWaitInOpen = maxWaitInOpen;
    }

    public int getPermittedCallsInHalfOpen() {
      return permittedCallsInHalfOpen;
    }

    public void setPermittedCallsInHalfOpen(int permittedCallsInHalfOpen) {
      this.permittedCallsInHalfOpen = permittedCallsInHalfOpen;
    }
  }

  /**
   * Redirect policy of one upstream. Its own origin (scheme, host, port of {@code url}) is always
   * allowed; any other host a redirect or token realm names is resolved and refused when it is
   * loopback, link-local, any-local, multicast or private (10/8, 172.16/12, 192.168/16, fc00::/7)
   * unless listed in {@code allowed-hosts}; the cache's own ports are always refused.
   */
  public static class Redirect {
    /** Host names, IP addresses or CIDR ranges that may be reached although private or local. */
    private List<String> allowedHosts = new ArrayList<>();

    /** Most redirects followed for one request. */
    private int maxHops = 5;

    public List<String> getAllowedHosts() {
      return allowedHosts;
    }

    public void setAllowedHosts(List<String> allowedHosts) {
      this.allowedHosts = allowedHosts;
    }

    public int getMaxHops() {
      return maxHops;
    }

    public void setMaxHops(int maxHops) {
      this.maxHops = maxHops;
    }
  }

  /** TLS for an https upstream. */
  public static class Tls {
    /** PEM file of CA certificates to trust in addition to the JVM's. */
    private Path caFile;

    /** PEM client certificate (chain) for mutual TLS. */
    private Path certFile;

    /** PEM PKCS#8 private key of the client certificate. */
    private Path keyFile;

    /** Skip certificate verification. Insecure; an explicit opt-in for test setups only. */
    private boolean insecureSkipVerify = false;

    public Path getCaFile() {
      return caFile;
    }

    public void setCaFile(Path caFile) {
      this.caFile = caFile;
    }

    public Path getCertFile() {
      return certFile;
    }

    public void setCertFile(Path certFile) {
      this.certFile = certFile;
    }

    public Path getKeyFile() {
      return keyFile;
    }

    public void setKeyFile(Path keyFile) {
      this.keyFile = keyFile;
    }

    public boolean isInsecureSkipVerify() {
      return insecureSkipVerify;
    }

    public void setInsecureSkipVerify(boolean insecureSkipVerify) {
      this.insecureSkipVerify = insecureSkipVerify;
    }
  }
}
