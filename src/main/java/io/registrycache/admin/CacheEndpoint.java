package io.registrycache.admin;

import com.google.re2j.Pattern;
import com.google.re2j.PatternSyntaxException;
import io.registrycache.config.AdminProperties;
import io.registrycache.oci.Digest;
import io.registrycache.oci.OciException;
import io.registrycache.proxy.ProxyBlobService;
import io.registrycache.storage.CacheCollector;
import io.registrycache.storage.CacheCollector.Removal;
import io.registrycache.storage.EvictionTurn;
import io.registrycache.storage.StorageJanitor;
import java.time.Duration;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Optional;
import org.jspecify.annotations.Nullable;
import org.springframework.boot.actuate.endpoint.annotation.Endpoint;
import org.springframework.boot.actuate.endpoint.annotation.ReadOperation;
import org.springframework.boot.actuate.endpoint.annotation.Selector;
import org.springframework.boot.actuate.endpoint.annotation.WriteOperation;
import org.springframework.boot.actuate.endpoint.web.WebEndpointResponse;
import org.springframework.boot.convert.DurationStyle;
import org.springframework.stereotype.Component;

/**
 * The cache's admin API, an Actuator endpoint: it is served on the management port ({@code
 * management.server.port}, 8081 by default) only, never on the registry port, and only when {@code
 * cache} is listed in {@code management.endpoints.web.exposure.include}.
 *
 * <ul>
 *   <li>{@code GET /actuator/cache} — totals and the disk budget
 *   <li>{@code GET /actuator/cache/images?filter=<regex>} — cached images (regular expressions are
 *       RE2 syntax, matched in linear time, at most {@code registry-cache.admin.max-pattern-length}
 *       characters), most recently pulled first
 *   <li>{@code GET /actuator/cache/blobs?filter=<regex>} — stored blobs
 *   <li>{@code POST /actuator/cache/prune} with JSON {@code {"olderThan":"14d", "pattern":"...",
 *       "keep":3, "dryRun":true}}
 *   <li>{@code POST /actuator/cache/evict} with JSON {@code {"upstream":"local",
 *       "repository":"library/alpine", "tag":"3.20"}} or {@code {"digest":"sha256:..."}}
 *   <li>{@code POST /actuator/cache/janitor} — run the budget check now
 *   <li>on a bucket shared by replicas, listings cover the whole bucket (a rescan first) with every
 *       replica's last pulls; {@code prune}, {@code evict} (not as dry runs) and {@code janitor}
 *       are answered 409 with {@code evictor} on every replica but the evicting one ({@link
 *       EvictionTurn})
 *   <li>{@code POST /actuator/cache/preload} with JSON {@code {"references":
 *       "registry.example.com/team/app:v1 team/x@sha256:...", "platforms":"linux/amd64"}} — queue a
 *       preload job ({@link Preloader}); answers 202 at once with the job's id. Both are strings
 *       holding a list separated by blanks, commas or line breaks ({@code #} comments allowed, so a
 *       preload file's content works as is): the actuator binds a JSON body as a map of strings, a
 *       JSON array is refused with 400. {@code platforms} empty or absent: every platform of an
 *       index
 *   <li>{@code GET /actuator/cache/preload} — the preload jobs, newest first; {@code GET
 *       /actuator/cache/preload/<id>} — one job: references total, done, failed (with the reason),
 *       bytes
 * </ul>
 *
 * Sizes are bytes, times ISO-8601 instants (UTC), durations Spring Boot style ({@code 30m}, {@code
 * 14d}) or ISO-8601 ({@code PT30M}). Bad input is answered with 400 and {@code {"error": "..."}} (a
 * body that is not a JSON object of strings too, {@link AdminRequestErrors}); an unknown path
 * segment, or an eviction from an upstream that is neither configured nor cached, with 404.
 */
@Component
@Endpoint(id = "cache")
public class CacheEndpoint {

  private final CacheInventory inventory;
  private final Pruner pruner;
  private final StorageJanitor janitor;
  private final Preloader preloader;
  private final ProxyBlobService blobDownloads;
  private final AdminProperties admin;

  /**
   * @param blobDownloads whose downloads in flight the summary counts
   */
  public CacheEndpoint(
      CacheInventory inventory,
      Pruner pruner,
      StorageJanitor janitor,
      Preloader preloader,
      ProxyBlobService blobDownloads,
      AdminProperties admin) {
    this.inventory = inventory;
    this.pruner = pruner;
    this.janitor = janitor;
    this.preloader = preloader;
    this.blobDownloads = blobDownloads;
    this.admin = admin;
  }

  /**
   * Totals: stored bytes and items, downloads in flight, the budget and its watermarks in bytes.
   */
  @ReadOperation
  public Map<String, Object> summary() {
    return Views.summary(inventory.totals(), blobDownloads.downloadsInFlight());
  }

  /**
   * {@code images} or {@code blobs}, optionally filtered by a regular expression; or the {@code
   * preload} jobs.
   */
  @ReadOperation
  public WebEndpointResponse<Object> list(@Selector String what, @Nullable String filter) {
    Pattern p;
    try {
      p = compile("filter", filter);
    } catch (IllegalArgumentException e) {
      return badRequest(e.getMessage());
    }
    return switch (what) {
      case "images" -> {
        inventory.freshen();
        yield ok(Map.of("images", inventory.images(p).stream().map(Views::image).toList()));
      }
      case "blobs" -> {
        inventory.freshen();
        yield ok(Map.of("blobs", inventory.blobs(p).stream().map(Views::blob).toList()));
      }
      case "preload" ->
          ok(Map.of("jobs", preloader.jobs().stream().map(PreloadJob::view).toList()));
      default ->
          new WebEndpointResponse<>(
              Map.of("error", "unknown list '" + what + "'; use images, blobs or preload"), 404);
    };
  }

  /** {@code preload/<id>}: one preload job's progress. */
  @ReadOperation
  public WebEndpointResponse<Object> item(@Selector String what, @Selector String id) {
    if (!"preload".equals(what)) {
      return new WebEndpointResponse<>(
          Map.of("error", "unknown path '" + what + "/" + id + "'"), 404);
    }
    return preloader
        .job(id)
        .map(job -> ok(job.view()))
        .orElseGet(
            () -> new WebEndpointResponse<>(Map.of("error", "no preload job '" + id + "'"), 404));
  }

  /** {@code prune}, {@code evict} or {@code janitor}; parameters from the JSON body. */
  @WriteOperation
  public WebEndpointResponse<Object> act(
      @Selector String action,
      @Nullable String olderThan,
      @Nullable String pattern,
      @Nullable String keep,
      @Nullable String dryRun,
      @Nullable String upstream,
      @Nullable String repository,
      @Nullable String tag,
      @Nullable String digest,
      @Nullable String references,
      @Nullable String platforms) {
    boolean dry;
    Integer keeping;
    try {
      dry = flag("dryRun", dryRun);
      keeping = wholeNumber("keep", keep);
    } catch (IllegalArgumentException e) {
      return badRequest(e.getMessage());
    }
    Optional<String> evictor = janitor.evictorElsewhere();
    if (evictor.isPresent()
        && (action.equals("janitor")
            || (!dry && (action.equals("prune") || action.equals("evict"))))) {
      return new WebEndpointResponse<>(
          Map.of(
              "error",
              "this replica does not evict or prune the shared store; send the request to "
                  + evictor.get()
                  + "'s management port (the owner of the key '"
                  + EvictionTurn.KEY
                  + "')",
              "evictor",
              evictor.get()),
          409);
    }
    try {
      return switch (action) {
        case "prune" -> {
          Duration age =
              olderThan == null || olderThan.isBlank()
                  ? null
                  : DurationStyle.detectAndParse(olderThan);
          Pattern p = compile("pattern", pattern);
          yield ok(Views.removal(pruner.prune(new PruneRequest(age, p, keeping, dry))));
        }
        case "evict" -> {
          Digest d = digest == null || digest.isBlank() ? null : Digest.parse(digest);
          if (d == null && (repository == null || tag == null)) {
            yield badRequest(
                "give digest, or repository and tag (and upstream, default: the default upstream)");
          }
          yield ok(Views.removal(pruner.evict(upstream, repository, tag, d, dry)));
        }
        case "janitor" -> {
          janitor.runOnce();
          yield ok(summary());
        }
        case "preload" ->
            preload(PreloadFile.parseList(references), PreloadFile.parseList(platforms));
        default ->
            new WebEndpointResponse<>(
                Map.of(
                    "error",
                    "unknown action '" + action + "'; use prune, evict, janitor or preload"),
                404);
      };
    } catch (Pruner.UnknownUpstreamException e) {
      return new WebEndpointResponse<>(Map.of("error", e.getMessage()), 404);
    } catch (IllegalArgumentException | OciException e) {
      return badRequest(e.getMessage());
    }
  }

  /**
   * A JSON boolean as the actuator hands it over (a string): {@code true} or {@code false}, any
   * case; absent is false. (The actuator's own conversion answers a bare "Parameter mapping
   * failure".)
   *
   * @throws IllegalArgumentException (answered 400) for anything else
   */
  static boolean flag(String what, @Nullable String value) {
    if (value == null || value.equalsIgnoreCase("false")) {
      return false;
    }
    if (value.equalsIgnoreCase("true")) {
      return true;
    }
    throw new IllegalArgumentException(what + " must be true or false, not '" + value + "'");
  }

  /**
   * A JSON number as the actuator hands it over (a string): a whole number, or {@code null} when
   * absent.
   *
   * @throws IllegalArgumentException (answered 400) for anything else
   */
  static @Nullable Integer wholeNumber(String what, @Nullable String value) {
    if (value == null || value.isBlank()) {
      return null;
    }
    try {
      return Integer.valueOf(value.strip());
    } catch (NumberFormatException e) {
      throw new IllegalArgumentException(what + " must be a whole number, not '" + value + "'");
    }
  }

  /**
   * A client's regular expression, compiled by RE2/J: matching takes time linear in the input (no
   * backtracking), so a pathological pattern cannot tie up a thread; backreferences and lookaround
   * are refused. {@code null} for none.
   *
   * @throws IllegalArgumentException (answered 400) when too long or not RE2 syntax
   */
  private @Nullable Pattern compile(String what, @Nullable String regex) {
    if (regex == null || regex.isBlank()) {
      return null;
    }
    int max = admin.maxPatternLength();
    if (regex.length() > max) {
      throw new IllegalArgumentException(what + " is longer than " + max + " characters");
    }
    try {
      return Pattern.compile(regex);
    } catch (PatternSyntaxException e) {
      throw new IllegalArgumentException(
          what
              + " is not a regular expression in RE2 syntax (no backreferences or lookaround): "
              + e.getDescription());
    }
  }

  private WebEndpointResponse<Object> preload(List<String> references, List<String> platforms) {
    if (references == null || references.isEmpty()) {
      return badRequest(
          "give references: image references separated by blanks, commas or line breaks, "
              + "e.g. \"registry.example.com/team/app:v1 team/x:v2\"");
    }
    PreloadPlatforms wanted = PreloadPlatforms.of(platforms);
    List<String> errors = preloader.check(references);
    if (!errors.isEmpty()) {
      return new WebEndpointResponse<>(
          Map.of("error", "invalid references, nothing preloaded", "references", errors), 400);
    }
    PreloadJob job = preloader.submit(references, wanted, "api");
    Map<String, Object> body = new LinkedHashMap<>();
    body.put("id", job.id());
    body.put("state", job.state().name().toLowerCase(Locale.ROOT));
    body.put("total", job.items().size());
    body.put("platforms", wanted.wanted());
    body.put("status", "/actuator/cache/preload/" + job.id());
    return new WebEndpointResponse<>(body, 202);
  }

  private static WebEndpointResponse<Object> ok(Object body) {
    return new WebEndpointResponse<>(body, 200);
  }

  private static WebEndpointResponse<Object> badRequest(String message) {
    return new WebEndpointResponse<>(Map.of("error", String.valueOf(message)), 400);
  }

  /** JSON shapes: plain maps of strings and numbers, independent of the mapper's settings. */
  static final class Views {
    private Views() {}

    static Map<String, Object> summary(CacheInventory.Totals t, long downloadsInFlight) {
      Map<String, Object> out = new LinkedHashMap<>();
      out.put("storedBytes", t.storedBytes());
      out.put("blobs", Map.of("count", t.blobs(), "bytes", t.blobBytes()));
      out.put("manifests", Map.of("count", t.manifests(), "bytes", t.manifestBytes()));
      out.put("downloadsInFlight", downloadsInFlight);
      Map<String, Object> budget = new LinkedHashMap<>();
      budget.put("maxBytes", t.budget().maxBytes());
      budget.put("highWatermarkBytes", t.budget().highWatermarkBytes());
      budget.put("lowWatermarkBytes", t.budget().lowWatermarkBytes());
      out.put("budget", budget);
      return out;
    }

    static Map<String, Object> image(CacheInventory.Image i) {
      Map<String, Object> m = new LinkedHashMap<>();
      m.put("image", i.image());
      m.put("upstream", i.upstream());
      m.put("repository", i.repository());
      m.put("tag", i.tag());
      m.put("digest", i.digest().toString());
      m.put("mediaType", i.mediaType());
      m.put("size", i.size());
      m.put("complete", i.complete());
      m.put("platforms", i.platforms());
      m.put("lastPulled", i.lastPulled().toString());
      m.put("created", i.created().toString());
      return m;
    }

    static Map<String, Object> blob(CacheInventory.BlobView b) {
      Map<String, Object> m = new LinkedHashMap<>();
      m.put("digest", b.digest().toString());
      m.put("size", b.size());
      m.put("manifests", b.manifests());
      m.put("lastPulled", b.lastPulled().toString());
      m.put("created", b.created().toString());
      return m;
    }

    static Map<String, Object> removal(Removal r) {
      Map<String, Object> m = new LinkedHashMap<>();
      m.put("dryRun", r.dryRun());
      m.put("bytes", r.bytes());
      m.put(
          "tags",
          r.tags().stream()
              .map(t -> Map.of("image", t.image(), "digest", t.digest().toString()))
              .toList());
      m.put("manifests", items(r.manifests()));
      m.put("blobs", items(r.blobs()));
      return m;
    }

    private static List<Map<String, Object>> items(List<CacheCollector.Item> items) {
      return items.stream()
          .map(
              i ->
                  Map.<String, Object>of(
                      "digest",
                      i.digest().toString(),
                      "size",
                      i.size(),
                      "lastPulled",
                      i.lastPulled().toString()))
          .toList();
    }
  }
}
