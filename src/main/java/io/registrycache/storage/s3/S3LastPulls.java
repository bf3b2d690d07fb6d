package io.registrycache.storage.s3;

import io.registrycache.oci.Digest;
import java.io.ByteArrayInputStream;
import java.io.ByteArrayOutputStream;
import java.io.DataInputStream;
import java.io.DataOutputStream;
import java.io.EOFException;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.time.Clock;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.HashMap;
import java.util.HashSet;
import java.util.HexFormat;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.OptionalLong;
import java.util.Set;
import java.util.TreeMap;
import java.util.UUID;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.TimeUnit;
import java.util.function.Predicate;
import java.util.zip.GZIPInputStream;
import java.util.zip.GZIPOutputStream;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Last-pulled times of blobs and manifests kept in the bucket, shared by every replica (issue 24):
 * each replica records its pulls here in memory ({@link #record}) and every {@code
 * storage.s3.access-flush} writes those that moved as one object {@code access/<epoch millis, 13
 * digits>-<replica id>} (a <em>delta</em>: digests and times, sorted, gzip-compressed; about 40
 * bytes a digest before compression), nothing when none moved. {@link #refresh} reads {@code
 * access/base} and the deltas it has not read yet and keeps the latest time per digest; the replica
 * that evicts folds them into a new {@code access/base} ({@link #compact}) and deletes the deltas
 * it folded. The replica id is random per process, so a restarted pod never overwrites its
 * predecessor's delta.
 *
 * <p>Times are epoch milliseconds; a digest's time only moves forward (the latest of every record).
 */
public final class S3LastPulls implements AutoCloseable {

  private static final Logger log = LoggerFactory.getLogger(S3LastPulls.class);

  /** Key prefix (under the store's prefix) of the pull records. */
  public static final String PREFIX = "access/";

  /** Key of the folded record: every digest's latest time when the evictor last compacted. */
  public static final String BASE = PREFIX + "base";

  private static final int MAGIC = 0x52434131; // "RCA1"
  private static final Duration TIMEOUT = Duration.ofMinutes(2);

  /** Longest wait for the last flush at shutdown. */
  static final Duration CLOSE_TIMEOUT = Duration.ofSeconds(5);

  private final S3Objects objects;
  private final Clock clock;
  private final Duration flushEvery;
  private final String replicaId = UUID.randomUUID().toString().substring(0, 8);

  /** Pulls recorded here and not written yet. */
  private final Map<Digest, Long> pending = new ConcurrentHashMap<>();

  /** The latest time per digest known from the bucket (read or written by this replica). */
  private final Map<Digest, Long> known = new ConcurrentHashMap<>();

  /** Deltas already merged into {@link #known}. Guarded by {@code this}. */
  private final Set<String> deltasRead = new HashSet<>();

  /** Entity tag of the base last read; guarded by {@code this}. */
  private String baseTag = "";

  private long lastRefreshNanos;

  /** When {@link #compact} last wrote the base; guarded by {@code this}. */
  private long lastCompactMillis;

  /** A compaction folds once this many deltas wait, */
  static final int COMPACT_AFTER_DELTAS = 16;

  /**
   * or once this many flush intervals passed since the last one (so a quiet cluster writes the base
   * rarely).
   */
  static final int COMPACT_AT_LEAST_EVERY_FLUSHES = 10;

  private volatile ScheduledExecutorService flusher;

  /**
   * @param objects the bucket and prefix
   * @param clock source of the deltas' key times
   * @param flushEvery how often recorded pulls are written ({@code storage.s3.access-flush})
   */
  public S3LastPulls(S3Objects objects, Clock clock, Duration flushEvery) {
    this.objects = objects;
    this.clock = clock;
    this.flushEvery = flushEvery;
  }

  /** How often recorded pulls are written. */
  public Duration flushEvery() {
    return flushEvery;
  }

  /** Starts writing recorded pulls every {@link #flushEvery}, on a daemon thread of its own. */
  @SuppressWarnings("FutureReturnValueIgnored") // the task logs its failures; close() ends it
  public synchronized void start() {
    if (flusher != null) {
      return;
    }
    flusher =
        Executors.newSingleThreadScheduledExecutor(
            r -> {
              Thread t = new Thread(r, "s3-last-pulls");
              t.setDaemon(true);
              return t;
            });
    long every = Math.max(100, flushEvery.toMillis());
    flusher.scheduleWithFixedDelay(this::flushSafely, every, every, TimeUnit.MILLISECONDS);
  }

  /**
   * Records a pull of {@code digest} at {@code millis}, to be written with the next delta; a time
   * not later than one already known from the bucket is not written again.
   */
  public void record(Digest digest, long millis) {
    if (millis > known.getOrDefault(digest, Long.MIN_VALUE)) {
      pending.merge(digest, millis, Math::max);
    }
  }

  /** A time known without a record (an object's last write, found by a listing): never written. */
  public void noteKnown(Digest digest, long millis) {
    known.merge(digest, millis, Math::max);
  }

  /** The latest time known for {@code digest}: from the bucket or recorded here. */
  public OptionalLong lastPull(Digest digest) {
    Long k = known.get(digest);
    Long p = pending.get(digest);
    if (k == null && p == null) {
      return OptionalLong.empty();
    }
    return OptionalLong.of(
        Math.max(k == null ? Long.MIN_VALUE : k, p == null ? Long.MIN_VALUE : p));
  }

  /**
   * Writes the pulls recorded since the last flush as one delta; nothing when there are none.
   * Blocking. On failure they stay recorded for the next flush.
   *
   * @return digests written
   */
  public int flush() throws IOException {
    return flush(TIMEOUT);
  }

  private int flush(Duration timeout) throws IOException {
    Map<Digest, Long> batch = new TreeMap<>(Comparator.comparing(Digest::toString));
    batch.putAll(pending);
    if (batch.isEmpty()) {
      return 0;
    }
    String key = String.format("%s%013d-%s", PREFIX, clock.millis(), replicaId);
    S3Calls.await(objects.putBytes(key, encode(batch)), timeout);
    batch.forEach(
        (d, t) -> {
          pending.remove(d, t); // a later pull recorded meanwhile stays for the next delta
          known.merge(d, t, Math::max);
        });
    synchronized (this) {
      deltasRead.add(key);
    }
    log.debug("last pulls: wrote {} ({} digests)", key, batch.size());
    return batch.size();
  }

  private void flushSafely() {
    flushSafely(TIMEOUT);
  }

  private void flushSafely(Duration timeout) {
    try {
      flush(timeout);
    } catch (IOException | RuntimeException e) {
      log.warn(
          "object store: cannot write this replica's last pulls, will try again: {}", e.toString());
    }
  }

  /**
   * Reads {@code access/base} when it changed and every delta not read yet, keeping the latest time
   * per digest. Blocking; a delta deleted meanwhile (folded by the evictor) is skipped.
   *
   * @return deltas read
   */
  public synchronized int refresh() {
    lastRefreshNanos = System.nanoTime();
    Optional<S3Objects.ObjectInfo> base = S3Calls.unchecked(objects.stat(BASE), TIMEOUT);
    // A new base (the evictor folded deltas): read it and every delta still there again, and
    // forget digests in none of them (evicted since), so memory follows what the bucket holds.
    Map<Digest, Long> inBucket = null;
    if (base.isPresent() && !base.get().eTag().equals(baseTag)) {
      Optional<byte[]> bytes = S3Calls.unchecked(objects.readAll(BASE), TIMEOUT);
      if (bytes.isPresent()) {
        inBucket = decode(bytes.get());
        mergeKnown(inBucket);
        baseTag = base.get().eTag();
        deltasRead.clear();
      }
    }
    List<String> keys =
        S3Calls.unchecked(objects.list(PREFIX).filter(k -> !k.equals(BASE)).collectList(), TIMEOUT);
    int read = 0;
    for (String key : keys) {
      if (deltasRead.contains(key)) {
        continue;
      }
      Optional<byte[]> bytes = S3Calls.unchecked(objects.readAll(key), TIMEOUT);
      if (bytes.isPresent()) {
        Map<Digest, Long> delta = decode(bytes.get());
        mergeKnown(delta);
        if (inBucket != null) {
          inBucket.putAll(delta);
        }
      }
      deltasRead.add(key);
      read++;
    }
    deltasRead.retainAll(new HashSet<>(keys));
    if (inBucket != null) {
      Map<Digest, Long> still = inBucket;
      known.keySet().removeIf(d -> !still.containsKey(d));
    }
    return read;
  }

  /** {@link #refresh} unless one began after {@code nanos} ({@link System#nanoTime}). */
  public synchronized void refreshUnlessSince(long nanos) {
    if (lastRefreshNanos == 0 || lastRefreshNanos - nanos <= 0) {
      refresh();
    }
  }

  /** {@link #refresh} unless one ran within {@code maxAge}. */
  public synchronized void refreshIfOlder(Duration maxAge) {
    if (lastRefreshNanos == 0 || System.nanoTime() - lastRefreshNanos > maxAge.toNanos()) {
      refresh();
    }
  }

  private void mergeKnown(Map<Digest, Long> times) {
    times.forEach((d, t) -> known.merge(d, t, Math::max));
  }

  /**
   * What the evictor folded: the digests written to the new base, the deltas deleted.
   *
   * @param digests digests in the new {@code access/base}
   * @param deltas deltas folded and deleted
   */
  public record Compaction(int digests, int deltas) {}

  /**
   * Folds every delta into a new {@code access/base} (the latest time of each digest {@code keep}
   * accepts: those still stored) and deletes the deltas folded, once {@value #COMPACT_AFTER_DELTAS}
   * deltas wait or {@value #COMPACT_AT_LEAST_EVERY_FLUSHES} flush intervals passed since the last
   * compaction; writes nothing when there was no delta. A delta written after the listing stays for
   * the next compaction. Run by the one replica that evicts. Blocking.
   */
  public synchronized Compaction compact(Predicate<Digest> keep) throws IOException {
    flush();
    refresh();
    List<String> folded = new ArrayList<>(deltasRead);
    boolean due =
        folded.size() >= COMPACT_AFTER_DELTAS
            || clock.millis() - lastCompactMillis
                >= COMPACT_AT_LEAST_EVERY_FLUSHES * flushEvery.toMillis();
    if (folded.isEmpty() || !due) {
      return new Compaction(0, 0);
    }
    Map<Digest, Long> all = new TreeMap<>(Comparator.comparing(Digest::toString));
    known.forEach(
        (d, t) -> {
          if (keep.test(d)) {
            all.put(d, t);
          }
        });
    known.keySet().removeIf(d -> !all.containsKey(d)); // evicted: nothing to compare with any more
    S3Calls.await(objects.putBytes(BASE, encode(all)), TIMEOUT);
    baseTag = S3Calls.await(objects.stat(BASE), TIMEOUT).map(S3Objects.ObjectInfo::eTag).orElse("");
    for (String key : folded) {
      S3Calls.await(objects.delete(key), TIMEOUT);
      deltasRead.remove(key);
    }
    lastCompactMillis = clock.millis();
    log.info("last pulls: folded {} deltas into {} ({} digests)", folded.size(), BASE, all.size());
    return new Compaction(all.size(), folded.size());
  }

  /**
   * Writes what is recorded (shutdown; waiting at most {@link #CLOSE_TIMEOUT}, so a store that is
   * gone does not hold the process) and stops the periodic flush.
   */
  @Override
  public void close() {
    ScheduledExecutorService f = flusher;
    if (f != null) {
      f.shutdownNow();
      flusher = null;
    }
    flushSafely(CLOSE_TIMEOUT);
  }

  /**
   * A record's bytes: gzip of {@code "RCA1"}, the count, then per digest (sorted by the caller): a
   * byte 0 with the algorithm and the hex digits as bytes, or 1 with the digest as text (an
   * encoding that is not lowercase hex), then the time as 8 bytes.
   */
  static byte[] encode(Map<Digest, Long> times) {
    ByteArrayOutputStream bytes = new ByteArrayOutputStream();
    try (DataOutputStream out = new DataOutputStream(new GZIPOutputStream(bytes))) {
      out.writeInt(MAGIC);
      out.writeInt(times.size());
      for (Map.Entry<Digest, Long> e : times.entrySet()) {
        Digest d = e.getKey();
        byte[] raw = rawHex(d.hex());
        if (raw != null) {
          out.writeByte(0);
          out.writeUTF(d.algorithm());
          out.writeShort(raw.length);
          out.write(raw);
        } else {
          out.writeByte(1);
          out.writeUTF(d.toString());
        }
        out.writeLong(e.getValue());
      }
    } catch (IOException e) {
      throw new UncheckedIOException(e); // in memory
    }
    return bytes.toByteArray();
  }

  /**
   * The times of a record's bytes ({@link #encode}); a record that is not one (another program's
   * object under {@code access/}) or is cut short is logged and read as far as it goes.
   */
  static Map<Digest, Long> decode(byte[] bytes) {
    Map<Digest, Long> out = new HashMap<>();
    try (DataInputStream in =
        new DataInputStream(new GZIPInputStream(new ByteArrayInputStream(bytes)))) {
      if (in.readInt() != MAGIC) {
        log.warn("object store: an object under {} is not a pull record; skipped", PREFIX);
        return out;
      }
      int n = in.readInt();
      for (int i = 0; i < n; i++) {
        Digest d;
        if (in.readByte() == 0) {
          String algorithm = in.readUTF();
          byte[] raw = new byte[in.readUnsignedShort()];
          in.readFully(raw);
          d = new Digest(algorithm, HexFormat.of().formatHex(raw));
        } else {
          d = Digest.parse(in.readUTF());
        }
        out.merge(d, in.readLong(), Math::max);
      }
    } catch (EOFException e) {
      log.warn(
          "object store: a pull record under {} is cut short; read {} digests", PREFIX, out.size());
    } catch (IOException | RuntimeException e) {
      log.warn(
          "object store: an object under {} is not a readable pull record ({}); read {} digests",
          PREFIX,
          e,
          out.size());
    }
    return out;
  }

  private static byte[] rawHex(String hex) {
    if (hex.length() % 2 != 0 || hex.length() > 2 * 0xFFFF) {
      return null;
    }
    for (int i = 0; i < hex.length(); i++) {
      char c = hex.charAt(i);
      if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) {
        return null;
      }
    }
    return HexFormat.of().parseHex(hex);
  }
}
