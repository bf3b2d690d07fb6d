package io.registrycache.admin;

import java.time.Clock;
import java.time.Instant;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;

/**
 * One preload run: a list of image references, pulled into the cache by {@link Preloader}. Jobs run
 * one after another ({@code queued} until their turn); within a job a few images at a time.
 * Thread-safe: the worker updates it while the admin API reads it.
 */
public final class PreloadJob {

  /** Where a job is. */
  public enum State {
    QUEUED,
    RUNNING,
    DONE
  }

  /** Where one reference of a job is. */
  public enum ItemState {
    PENDING,
    RUNNING,
    DONE,
    FAILED
  }

  private final String id;
  private final String source;
  private final PreloadPlatforms platforms;
  private final List<Item> items;
  private final Clock clock;
  private final Instant created;
  private volatile Instant started;
  private volatile Instant finished;

  PreloadJob(
      String id, String source, List<String> references, PreloadPlatforms platforms, Clock clock) {
    this.id = id;
    this.source = source;
    this.platforms = platforms;
    this.items = references.stream().map(Item::new).toList();
    this.clock = clock;
    this.created = clock.instant();
  }

  /** The job's id, used in {@code GET /actuator/cache/preload/<id>}. */
  public String id() {
    return id;
  }

  /** {@code api} or {@code file:<path>}. */
  public String source() {
    return source;
  }

  public PreloadPlatforms platforms() {
    return platforms;
  }

  /** One entry per reference, in the order given. */
  public List<Item> items() {
    return items;
  }

  public State state() {
    if (finished != null) {
      return State.DONE;
    }
    return started != null ? State.RUNNING : State.QUEUED;
  }

  void markStarted() {
    started = clock.instant();
  }

  void markFinished() {
    finished = clock.instant();
  }

  /** How many references are in {@code state}. */
  public long count(ItemState state) {
    return items.stream().filter(i -> i.state() == state).count();
  }

  /** The job as JSON-ready maps: counts, byte totals and every reference's progress. */
  public Map<String, Object> view() {
    Map<String, Object> m = new LinkedHashMap<>();
    m.put("id", id);
    m.put("source", source);
    m.put("state", state().name().toLowerCase(Locale.ROOT));
    m.put("platforms", platforms.wanted());
    m.put("created", created.toString());
    m.put("started", started == null ? null : started.toString());
    m.put("finished", finished == null ? null : finished.toString());
    m.put("total", items.size());
    m.put("done", count(ItemState.DONE));
    m.put("failed", count(ItemState.FAILED));
    m.put("pending", count(ItemState.PENDING) + count(ItemState.RUNNING));
    m.put("bytes", items.stream().mapToLong(Item::bytes).sum());
    m.put("fetchedBytes", items.stream().mapToLong(Item::fetchedBytes).sum());
    m.put("references", items.stream().map(Item::view).toList());
    return m;
  }

  /** The progress of one reference. */
  public static final class Item {
    private final String reference;
    private volatile ItemState state = ItemState.PENDING;
    private final AtomicInteger manifests = new AtomicInteger();
    private final AtomicInteger blobs = new AtomicInteger();
    private final AtomicLong bytes = new AtomicLong();
    private final AtomicLong fetchedBytes = new AtomicLong();
    private volatile String error;
    private volatile String digest;

    Item(String reference) {
      this.reference = reference;
    }

    public String reference() {
      return reference;
    }

    public ItemState state() {
      return state;
    }

    /** Bytes of the image's manifests and blobs now in the cache (the chosen platforms only). */
    public long bytes() {
      return bytes.get();
    }

    /** Of {@link #bytes()}, those fetched from the upstream by this job (the rest were hits). */
    public long fetchedBytes() {
      return fetchedBytes.get();
    }

    public int manifests() {
      return manifests.get();
    }

    public int blobs() {
      return blobs.get();
    }

    /** Why it failed, or {@code null}. */
    public String error() {
      return error;
    }

    void running() {
      // A re-run of the same item (never happens today) starts from zero.
      state = ItemState.RUNNING;
    }

    void resolved(String topDigest) {
      if (digest == null) {
        digest = topDigest;
      }
    }

    void manifest(long size, boolean fetched) {
      manifests.incrementAndGet();
      bytes.addAndGet(size);
      if (fetched) {
        fetchedBytes.addAndGet(size);
      }
    }

    void blob(long size, boolean fetched) {
      blobs.incrementAndGet();
      bytes.addAndGet(size);
      if (fetched) {
        fetchedBytes.addAndGet(size);
      }
    }

    void done() {
      state = ItemState.DONE;
    }

    void failed(String why) {
      error = why;
      state = ItemState.FAILED;
    }

    Map<String, Object> view() {
      Map<String, Object> m = new LinkedHashMap<>();
      m.put("reference", reference);
      m.put("state", state.name().toLowerCase(Locale.ROOT));
      m.put("digest", digest);
      m.put("manifests", manifests.get());
      m.put("blobs", blobs.get());
      m.put("bytes", bytes.get());
      m.put("fetchedBytes", fetchedBytes.get());
      m.put("error", error);
      return m;
    }
  }
}
