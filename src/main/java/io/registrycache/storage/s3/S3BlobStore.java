package io.registrycache.storage.s3;

import io.registrycache.config.ContentScope;
import io.registrycache.oci.Digest;
import io.registrycache.storage.BlobIndex;
import io.registrycache.storage.BlobStore;
import io.registrycache.storage.BlobWriter;
import io.registrycache.storage.ContentLinks;
import io.registrycache.storage.StorageLayout;
import io.registrycache.storage.StoredContent;
import java.io.IOException;
import java.io.InterruptedIOException;
import java.net.URI;
import java.nio.ByteBuffer;
import java.nio.file.Path;
import java.time.Clock;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.Executors;
import java.util.concurrent.RejectedExecutionException;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.ScheduledFuture;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import org.springframework.core.io.buffer.DataBuffer;
import org.springframework.core.io.buffer.DataBufferFactory;
import org.springframework.http.HttpRange;
import reactor.core.publisher.Flux;
import reactor.core.publisher.Mono;
import reactor.core.scheduler.Schedulers;

/**
 * Blobs in an S3-API object store, content-addressed under {@code <prefix>blobs/<algorithm>/<hex>}
 * (issue 11): the object-store {@link BlobStore}, interchangeable with the file-system one.
 *
 * <p><b>Writing.</b> A fill writes the local temporary file it writes on the file-system store
 * ({@link BlobWriter}, which verifies size and digest in {@code commit}; clients joined to the
 * fill tail that file), and uploads it as it grows: each time {@code storage.s3.part-size} bytes
 * are in the file beyond what was sent, that region goes as the next part of a multipart upload
 * (started with the first part, straight from the file; at most {@value #MAX_PARTS_IN_FLIGHT} parts
 * in flight, the fill waits beyond that). At commit, once verified, the rest goes
 * as the last part and the upload is completed to the final key; a blob smaller than one part is
 * one PUT of the verified file. A mismatch, an upstream error or an abort aborts the upload, so no
 * object ever appears under a final key unverified. Uploads of a replica killed mid-fill are
 * aborted by that replica at its restart (it records its uploads under {@code storage.path}:
 * {@link OwnUploads}), by the next writer that stores the same blob (it aborts the key's other
 * uploads), and in any case when older than {@code storage.s3.abandoned-upload-age}, at start-up
 * and every half of that age. After the commit the temporary file stays for the delete grace (at least 30 s) for
 * readers that join the finished fill, then goes: it is the local tier of the fill only.
 *
 * <p><b>Index.</b> Like the file-system store, the whole index (digest → size, created,
 * last-pulled; about 150 bytes a blob) is in memory, loaded at start-up by listing {@code blobs/}
 * (one request per 1,000 blobs, 32 prefixes at once: {@link S3Objects#listContentWithSizes}), so the hit path ({@link #lookup}, {@link #open}) makes no request
 * before the transfer, and eviction, the admin API and metrics see every blob. Not a bounded
 * cache with HEAD on a miss: a HEAD per miss would cost a round trip on every cold pull, and the
 * budget and LRU eviction need the full picture. The index is brought up to date with the bucket
 * every {@code storage.s3.index-refresh} (default 5 min) by another listing ({@link
 * #refreshIndex}); in between, a blob another replica stored is a miss here (a duplicate fill of
 * identical bytes, harmless). Last-pulled times are kept in memory only (after a restart a blob's
 * last pull is its last write). A blob whose object another
 * replica removed fails the one read that finds it gone and leaves the index then (the next
 * request refills it).
 *
 * <p><b>Links.</b> Where a blob may be served ({@link ContentLinks}) is kept in the bucket too
 * ({@link S3Links}), so a replica that starts empty, or offline, serves what another linked; they
 * are looked up on a blob's first use here (one HEAD), not listed at start-up.
 *
 * <p><b>Reading.</b> {@link StoredContent} without a file: whole or ranged GETs of the object,
 * streamed through the replica; with {@code storage.s3.redirect}, a presigned URL of the object
 * that the registry API answers with a 307 ({@link StoredContent#redirect}). With {@code
 * storage.s3.local-tier-size}, a verified local copy ({@link S3LocalTier}) when there is one — a
 * file, sent zero-copy — and otherwise the object, while a copy is downloaded in the background.
 */
public final class S3BlobStore implements BlobStore {

  private static final Logger log = LoggerFactory.getLogger(S3BlobStore.class);
  /** Key prefix (under the store's prefix) of blobs. */
  public static final String BLOBS = "blobs/";
  /** Longest wait for one object-store operation from a blocking caller. */
  static final Duration REQUEST_TIMEOUT = Duration.ofMinutes(10);
  /** When a fill behind an owner looks for the owner's object before uploading its own: about 4 s in all. */
  static final List<Duration> OWNER_COPY_WAITS = List.of(
      Duration.ZERO, Duration.ofMillis(100), Duration.ofMillis(250), Duration.ofMillis(500), Duration.ofSeconds(1), Duration.ofSeconds(2));
  /** The waits in use: {@link #OWNER_COPY_WAITS} unless a test shortened them ({@link #ownerCopyWaits(List)}). */
  private volatile List<Duration> ownerCopyWaits = OWNER_COPY_WAITS;

  /** Parts of one upload being sent at once, at most; a fill waits for the oldest beyond that. */
  static final int MAX_PARTS_IN_FLIGHT = 4;
  /** Longest wait for the abort of an upload; left to the sweeper beyond that. */
  private static final Duration ABORT_TIMEOUT = Duration.ofSeconds(30);
  private static final Duration MIN_TEMP_GRACE = Duration.ofSeconds(30);
  private static final int CHUNK = 64 * 1024;

  private final S3Objects objects;
  private final StorageLayout layout;
  private final Clock clock;
  private final Duration deleteGrace;
  private final long partSize;
  private final Duration abandonedUploadAge;
  private final boolean redirect;
  private final BlobIndex index = new BlobIndex();
  /** Open writers per digest: a pending delete waits for them. */
  private final Map<Digest, Integer> writing = new ConcurrentHashMap<>();
  private final AtomicLong uploadsSkipped = new AtomicLong();
  private final AtomicLong uploadsBehindOwner = new AtomicLong();
  private final ScheduledExecutorService executor;
  private final ScheduledFuture<?> sweeper;
  private final ScheduledFuture<?> refresher;
  private final ContentLinks links;
  /** Local copies of blobs ({@code storage.s3.local-tier-size}); null when off. */
  private final S3LocalTier tier;
  /** This replica's record of the uploads it started and has not finished. */
  private final OwnUploads ownUploads;
  private final AtomicLong othersUploadsAborted = new AtomicLong();
  private volatile Runnable onStored = () -> {};

  /**
   * Loads the index by listing the store, aborts abandoned uploads, and loads the links.
   * Blocking (start-up).
   *
   * @param objects the bucket and prefix
   * @param layout local folders: temporary files of fills
   * @param clock source of access times
   * @param deleteGrace how long an evicted blob's object stays after leaving the index
   * @param scope where a stored blob may be served
   * @param properties part size and abandoned-upload age
   */
  public S3BlobStore(
      S3Objects objects, StorageLayout layout, Clock clock, Duration deleteGrace, ContentScope scope, S3StorageProperties properties) {
    this.objects = objects;
    this.layout = layout;
    this.clock = clock;
    this.deleteGrace = deleteGrace;
    this.partSize = properties.partSize().toBytes();
    this.abandonedUploadAge = properties.abandonedUploadAge();
    this.redirect = properties.redirect();
    this.executor =
        Executors.newSingleThreadScheduledExecutor(
            r -> {
              Thread t = new Thread(r, "s3-blob-sweeper");
              t.setDaemon(true);
              return t;
            });
    long started = System.nanoTime();
    objects.listContentWithSizes(BLOBS).doOnNext(this::index).blockLast(REQUEST_TIMEOUT);
    log.info(
        "blob index from the object store: {} blobs, {} bytes, listed in {} ms",
        index.count(), index.bytes(), (System.nanoTime() - started) / 1_000_000);
    long tierBytes = properties.localTierSize().toBytes();
    this.tier = tierBytes > 0 && !redirect
        ? new S3LocalTier(objects, layout, tierBytes, deleteGrace, index::size)
        : null;
    try {
      this.ownUploads = new OwnUploads(layout);
    } catch (IOException e) {
      throw new java.io.UncheckedIOException("cannot create the folder of upload records under " + layout.root(), e);
    }
    abortOwnLeftUploads();
    abortAbandonedUploads();
    long period = Math.max(1000, abandonedUploadAge.toMillis() / 2);
    this.sweeper = executor.scheduleWithFixedDelay(this::abortAbandonedUploads, period, period, TimeUnit.MILLISECONDS);
    long refresh = properties.indexRefresh().toMillis();
    this.refresher = refresh <= 0 ? null
        : executor.scheduleWithFixedDelay(this::refreshIndexSafely, refresh, refresh, TimeUnit.MILLISECONDS);
    this.links = new ContentLinks(new S3Links(objects, "blobs", true), "blobs", scope, index::contains);
  }

  private void index(S3Objects.Listed o) {
    Optional<Digest> digest = digestOf(o.key());
    if (digest.isEmpty()) {
      log.warn("object store: skipping {}, not a blob key", o.key());
      return;
    }
    long created = o.lastModified().toEpochMilli();
    index.found(digest.get(), o.size(), created, created);
  }

  /** The key of blob {@code digest}, relative to the store's prefix. */
  public static String key(Digest digest) {
    return BLOBS + digest.algorithm() + "/" + digest.hex();
  }

  private static Optional<Digest> digestOf(String key) {
    String rest = key.substring(BLOBS.length());
    int slash = rest.indexOf('/');
    if (slash < 0) {
      return Optional.empty();
    }
    String value = rest.substring(0, slash) + ":" + rest.substring(slash + 1);
    return Digest.looksLikeDigest(value) ? Optional.of(Digest.parse(value)) : Optional.empty();
  }

  /**
   * Brings the index up to date with the bucket: blobs other replicas stored are added (created
   * and last pulled: the object's last write), blobs whose objects are gone are dropped — only
   * those indexed before the listing started and not being written here, so a commit racing the
   * listing is kept. One LIST per 1,000 blobs. Blocking.
   *
   * @return blobs added plus blobs dropped
   */
  int refreshIndex() {
    long started = clock.millis();
    java.util.Set<Digest> seen = new java.util.HashSet<>();
    int[] changed = {0};
    objects.listContentWithSizes(BLOBS)
        .doOnNext(o -> digestOf(o.key()).ifPresent(d -> {
          seen.add(d);
          long created = o.lastModified().toEpochMilli();
          if (index.found(d, o.size(), created, created)) {
            changed[0]++;
          }
        }))
        .blockLast(REQUEST_TIMEOUT);
    index.forEach((d, listed) -> {
      if (!seen.contains(d) && listed.createdMillis() < started && !writing.containsKey(d)) {
        if (index.removeIf(d, e -> e == listed)) { // not if stored again meanwhile
          changed[0]++;
        }
        if (tier != null && !index.contains(d)) {
          tier.remove(d);
        }
      }
    });
    if (changed[0] > 0) {
      log.info("blob index refreshed from the object store: {} changes, {} blobs, {} bytes", changed[0], index.count(), index.bytes());
    }
    return changed[0];
  }

  private void refreshIndexSafely() {
    try {
      refreshIndex();
    } catch (RuntimeException e) {
      log.warn("object store: cannot refresh the blob index, will try again: {}", e.toString());
    }
  }

  /**
   * Aborts the uploads this replica started in a previous run and did not finish (it was killed
   * mid-fill, or an abort failed), as its own record lists them ({@link OwnUploads}); at start-up,
   * whatever their age. A record whose abort fails is kept for the next start (and the upload for
   * the {@code abandoned-upload-age} sweep).
   *
   * @return uploads aborted (or found gone already)
   */
  int abortOwnLeftUploads() {
    List<OwnUploads.Recorded> left;
    try {
      left = ownUploads.left();
    } catch (IOException e) {
      log.warn("cannot read this replica's upload records: {}", e.toString());
      return 0;
    }
    int aborted = 0;
    for (OwnUploads.Recorded r : left) {
      try {
        objects.abortUpload(r.key(), r.uploadId()).block(ABORT_TIMEOUT);
        ownUploads.forget(r.file());
        aborted++;
      } catch (RuntimeException e) {
        log.warn("object store: cannot abort this replica's unfinished upload to {}, will try at the next start: {}",
            r.key(), e.toString());
      }
    }
    if (aborted > 0) {
      log.info("object store: aborted {} multipart uploads this replica left unfinished (killed mid-fill)", aborted);
    }
    return aborted;
  }

  /**
   * Aborts every other multipart upload to the key of {@code digest}, whose object is now in the
   * bucket: the upload of an owner that died mid-fill (this replica took its blob over), or of a
   * concurrent writer of the same bytes, which then finds the object and keeps it. One LIST of
   * the key's uploads. Failures are logged: the {@code abandoned-upload-age} sweep remains.
   */
  private void abortOthersUploads(Digest digest, String ownUploadId) {
    try {
      List<S3Objects.OpenUpload> others = objects.uploadsTo(key(digest))
          .filter(u -> !u.uploadId().equals(ownUploadId))
          .collectList()
          .block(ABORT_TIMEOUT);
      for (S3Objects.OpenUpload u : others == null ? List.<S3Objects.OpenUpload>of() : others) {
        objects.abortUpload(u.key(), u.uploadId()).block(ABORT_TIMEOUT);
        othersUploadsAborted.incrementAndGet();
        log.info("blob {}: aborted another writer's unfinished upload (started {}) now that the object is stored", digest, u.initiated());
      }
    } catch (RuntimeException e) {
      log.warn("blob {}: cannot look for other writers' uploads to abort: {}", digest, e.toString());
    }
  }

  /** Uploads of other writers aborted because this replica stored their blob (since start-up). */
  public long othersUploadsAborted() {
    return othersUploadsAborted.get();
  }

  /** Aborts multipart uploads older than {@code abandoned-upload-age}: those of killed fills. */
  int abortAbandonedUploads() {
    try {
      Integer n = objects.abortUploadsStartedBefore(clock.instant().minus(abandonedUploadAge)).block(REQUEST_TIMEOUT);
      if (n != null && n > 0) {
        log.info("object store: aborted {} abandoned multipart uploads", n);
      }
      return n == null ? 0 : n;
    } catch (RuntimeException e) {
      log.warn("object store: cannot abort abandoned uploads, will try again: {}", e.toString());
      return 0;
    }
  }

  @Override
  public ContentLinks links() {
    return links;
  }

  /** The local tier, when {@code storage.s3.local-tier-size} turned it on (tests). */
  Optional<S3LocalTier> localTier() {
    return Optional.ofNullable(tier);
  }

  @Override
  public Optional<Long> size(Digest digest) {
    return index.size(digest);
  }

  /**
   * One {@code HEAD} of the blob's object when the index does not have it: another replica may
   * have stored it since the last {@code index-refresh}. Indexed as created now (so a refresh that
   * listed the bucket before the object appeared does not drop it).
   */
  @Override
  public Mono<Boolean> recheck(Digest digest) {
    if (index.contains(digest)) {
      return Mono.just(true);
    }
    return objects.stat(key(digest))
        .map(info -> {
          info.ifPresent(i -> {
            long now = clock.millis();
            if (index.found(digest, i.size(), now, now)) {
              log.debug("object store: {} found in the bucket, stored by another replica", digest);
            }
          });
          return info.isPresent();
        })
        .onErrorResume(e -> {
          log.warn("object store: cannot look for {} in the bucket, filling it as a miss: {}", digest, e.toString());
          return Mono.just(false);
        });
  }

  @Override
  public Optional<Long> lookup(Digest digest) {
    Entry e = index.pulled(digest, clock.millis());
    return e == null ? Optional.empty() : Optional.of(e.size());
  }

  @Override
  public Optional<StoredContent> open(Digest digest) {
    Entry e = index.pulled(digest, clock.millis());
    if (e == null) {
      return Optional.empty();
    }
    if (tier != null) {
      Optional<StoredContent> local = tier.open(digest, e.size());
      if (local.isPresent()) {
        return local;
      }
      tier.fillLater(digest, e.size());
    }
    return Optional.of(new StoredObject(digest, e.size()));
  }

  @Override
  public void touch(Digest digest) {
    index.pulled(digest, clock.millis());
  }

  @Override
  public Optional<Entry> entry(Digest digest) {
    return index.entry(digest);
  }

  @Override
  public List<BlobInfo> list() {
    return index.list();
  }

  /**
   * A writer for blob {@code digest} over a new local temporary file, uploading as it grows.
   * Several writers of one digest may exist at once: each completes its own upload to the same
   * key, the last wins, the bytes are the same. Blocking.
   */
  @Override
  public BlobWriter newWriter(Digest digest) throws IOException {
    return newWriter(digest, false);
  }

  /**
   * A writer that uploads nothing while the bytes arrive; at the commit the owner's object under
   * the final key (looked for for up to {@link #OWNER_COPY_WAITS}) makes the upload unnecessary,
   * else the verified file is uploaded then. Either way readers get the verified bytes as before.
   */
  @Override
  public BlobWriter newWriterBehindOwner(Digest digest) throws IOException {
    return newWriter(digest, true);
  }

  private BlobWriter newWriter(Digest digest, boolean behindOwner) throws IOException {
    writing.merge(digest, 1, Integer::sum);
    try {
      return new BlobWriter(digest, layout.newTempFile("blob-" + digest.hex().substring(0, 12)), new Upload(digest, behindOwner));
    } catch (IOException | RuntimeException e) {
      writing.computeIfPresent(digest, (d, n) -> n > 1 ? n - 1 : null);
      throw e;
    }
  }

  /** The object-store side of one {@link BlobWriter}. Used by the writer's one thread, but {@link #closed} may come from an aborting one. */
  private final class Upload implements BlobWriter.Sink {
    private final Digest digest;
    private volatile S3Objects.Upload upload;
    /** This replica's record of {@link #upload} ({@link OwnUploads}); null before it starts. */
    private volatile Path record;
    /** Bytes sent as parts so far. */
    private long sent;
    /** Nothing sent yet: the owner replica is storing the same bytes ({@link #newWriterBehindOwner}). */
    private volatile boolean behindOwner;

    Upload(Digest digest, boolean behindOwner) {
      this.digest = digest;
      this.behindOwner = behindOwner;
    }

    @Override
    public void appended(Path temp, long written) throws IOException {
      if (behindOwner) {
        return;
      }
      // Keep at least one byte back: the last part must not be empty.
      while (written - sent > partSize) {
        if (upload == null) {
          S3Objects.Upload started = await(objects.startUpload(key(digest)));
          record = ownUploads.record(started.key(), started.uploadId());
          upload = started;
        }
        // Backpressure: a fill outrunning the store waits here (and so reads its upstream slower).
        try {
          await(upload.partsInFlightAtMost(MAX_PARTS_IN_FLIGHT - 1));
        } catch (IOException e) {
          if (uploadTakenOver(e)) {
            return;
          }
          throw e;
        }
        upload.addPart(temp, sent, partSize);
        sent += partSize;
      }
    }

    /**
     * Whether {@code e} says this fill's upload is gone (404: another writer stored the blob and
     * aborted it, {@link #abortOthersUploads}). The fill then continues as one behind an owner:
     * nothing more is sent, and at the commit the object under the final key (always verified
     * content) is looked for, and this replica's copy uploaded only if it is not there.
     */
    private boolean uploadTakenOver(IOException e) {
      if (e.getCause() == null || !S3Objects.notFound(e.getCause())) {
        return false;
      }
      log.info("blob {}: this fill's upload was aborted by another writer that stored the blob; checking its object at the commit", digest);
      ownUploads.forget(record);
      record = null;
      upload = null;
      sent = 0;
      behindOwner = true;
      return true;
    }

    @Override
    public Path store(Path temp, long size) throws IOException {
      boolean ownersCopy = behindOwner && ownersCopy(digest, size);
      if (ownersCopy) {
        uploadsSkipped.incrementAndGet();
        log.debug("blob {}: the owner's object is in the bucket; not uploaded again", digest);
      } else {
        if (behindOwner) {
          behindOwner = false;
          uploadsBehindOwner.incrementAndGet();
          log.info("blob {}: the owner's object is not in the bucket after {}; uploading this replica's copy", digest,
              ownerCopyWaits.stream().reduce(Duration.ZERO, Duration::plus));
          appended(temp, size);
        }
        S3Objects.Upload u = upload;
        if (u == null) {
          await(objects.putFile(key(digest), temp, 0, size));
        } else {
          if (size > sent) {
            u.addPart(temp, sent, size - sent);
          }
          try {
            await(u.complete());
          } catch (IOException e) {
            if (!uploadTakenOver(e)) {
              throw e;
            }
            // Aborted by another writer that stored the same blob: now a fill behind an owner,
            // which takes that object (verified bytes) or, when it is not there, uploads this copy.
            return store(temp, size);
          }
          ownUploads.forget(record);
          record = null;
        }
        if (size > partSize) { // only a blob of several parts has ever been a multipart upload
          abortOthersUploads(digest, u == null ? "" : u.uploadId());
        }
      }
      index.stored(digest, size, clock.millis(), () -> {});
      if (tier != null) {
        tier.adopt(digest, temp, size);
      }
      Duration keep = deleteGrace.compareTo(MIN_TEMP_GRACE) > 0 ? deleteGrace : MIN_TEMP_GRACE;
      schedule(() -> StorageLayout.deleteQuietly(temp), keep);
      return temp;
    }

    @Override
    public void ownerGaveUp() {
      behindOwner = false; // the next append uploads the parts so far, as a plain fill would have
    }

    @Override
    public void closed(boolean stored) {
      writing.computeIfPresent(digest, (d, n) -> n > 1 ? n - 1 : null);
      if (stored) {
        onStored.run();
        return;
      }
      S3Objects.Upload u = upload;
      if (u != null) {
        Path recorded = record;
        Mono<Void> abort = u.abort()
            .doOnError(e -> log.warn("cannot abort upload of blob {}: {}", digest, e.toString()))
            .doOnSuccess(done -> ownUploads.forget(recorded));
        if (Schedulers.isInNonBlockingThread()) {
          abort.subscribe(null, e -> {});
        } else {
          try {
            abort.onErrorComplete().block(ABORT_TIMEOUT);
          } catch (RuntimeException e) {
            // timed out: the sweeper aborts it once it is older than abandoned-upload-age
          }
        }
      }
    }
  }

  /**
   * Whether the object of {@code digest} is in the bucket with {@code size} bytes, looked for
   * until {@link #OWNER_COPY_WAITS} are over: an owner completes its upload just after it sent the
   * last byte. An object under a final key is always verified content. Blocking.
   */
  private boolean ownersCopy(Digest digest, long size) throws IOException {
    for (Duration wait : ownerCopyWaits) {
      if (!wait.isZero()) {
        try {
          Thread.sleep(wait.toMillis());
        } catch (InterruptedException e) {
          Thread.currentThread().interrupt();
          throw new InterruptedIOException("interrupted waiting for the owner's copy of " + digest);
        }
      }
      Optional<S3Objects.ObjectInfo> info = await(objects.stat(key(digest)));
      if (info.isPresent() && info.get().size() == size) {
        return true;
      }
    }
    return false;
  }

  /** Fills behind an owner whose object was there at the commit, so nothing was uploaded (since start-up). */
  public long uploadsSkipped() {
    return uploadsSkipped.get();
  }

  /** Fills behind an owner whose object was not there at the commit, so this replica uploaded (since start-up). */
  public long uploadsBehindOwner() {
    return uploadsBehindOwner.get();
  }

  private static <T> T await(Mono<T> operation) throws IOException {
    try {
      return operation.block(REQUEST_TIMEOUT);
    } catch (RuntimeException e) {
      Throwable cause = reactor.core.Exceptions.unwrap(e);
      if (cause instanceof InterruptedException) {
        Thread.currentThread().interrupt();
        throw new InterruptedIOException("interrupted waiting for the object store");
      }
      throw new IOException("object store: " + cause, cause);
    }
  }

  /**
   * Replaces the waits before each look for an owner's object ({@link #OWNER_COPY_WAITS}, about 4 s
   * in all), so that a test of a fill whose owner's object never appears need not wait them out.
   *
   * @param waits the pause before each look, in order; the first is usually zero
   */
  void ownerCopyWaits(List<Duration> waits) {
    this.ownerCopyWaits = List.copyOf(waits);
  }

  /**
   * A blob in the index whose object is gone (evicted or pruned by another replica on the same
   * bucket): dropped from the index, so the next request is a miss and fills it again.
   */
  private void vanished(Digest digest) {
    if (index.removeIf(digest, e -> true)) {
      log.warn("blob {} is gone from the object store (removed by another replica?); dropped from the index", digest);
    }
    if (tier != null) {
      tier.remove(digest);
    }
  }

  @Override
  public void onStored(Runnable listener) {
    this.onStored = listener;
  }

  /**
   * Takes a stored blob out of the index now and deletes its object after the delete grace.
   *
   * @param ifNotPulledSince epoch milliseconds: the blob is kept when it was pulled after this;
   *     {@code Long.MAX_VALUE} to evict regardless
   * @return bytes freed, or -1 when the blob was not stored or was kept
   */
  @Override
  public long evict(Digest digest, long ifNotPulledSince) {
    long freed = index.evict(digest, ifNotPulledSince);
    if (freed >= 0) {
      if (tier != null) {
        tier.remove(digest);
      }
      links.unlinkAll(digest);
      schedule(() -> deleteIfUnused(digest), deleteGrace);
    }
    return freed;
  }

  private void schedule(Runnable task, Duration delay) {
    if (delay.isZero() || delay.isNegative()) {
      task.run();
      return;
    }
    try {
      executor.schedule(task, delay.toMillis(), TimeUnit.MILLISECONDS);
    } catch (RejectedExecutionException e) {
      task.run(); // shutting down
    }
  }

  /**
   * Deletes the object of an evicted blob unless it was stored again meanwhile; under the index's
   * lock for the digest, so it cannot interleave with a commit of it by this replica.
   */
  private void deleteIfUnused(Digest digest) {
    if (writing.containsKey(digest)) {
      schedule(() -> deleteIfUnused(digest), deleteGrace.isZero() ? Duration.ofSeconds(1) : deleteGrace);
      return;
    }
    index.ifAbsent(digest, () -> {
      try {
        objects.delete(key(digest)).block(REQUEST_TIMEOUT);
      } catch (RuntimeException ex) {
        log.warn("object store: cannot delete evicted blob {}: {}", digest, ex.toString());
      }
    });
  }

  /** Last-pulled times are kept in memory only on the object store (see the class comment). */
  @Override
  public int persistAccessTimes() {
    return 0;
  }

  @Override
  public int count() {
    return index.count();
  }

  @Override
  public long bytes() {
    return index.bytes();
  }

  /** Runs what waits out its grace now (deletes), and stops the sweeper. Does not close {@link S3Objects}. */
  @Override
  public void close() {
    sweeper.cancel(false);
    if (tier != null) {
      tier.close();
    }
    if (refresher != null) {
      refresher.cancel(false);
    }
    for (Runnable pending : executor.shutdownNow()) {
      pending.run();
    }
  }

  /** A stored object, read by whole or ranged GETs. */
  private final class StoredObject implements StoredContent {
    private final Digest digest;
    private final long size;

    StoredObject(Digest digest, long size) {
      this.digest = digest;
      this.size = size;
    }

    @Override
    public Digest digest() {
      return digest;
    }

    @Override
    public long size() {
      return size;
    }

    @Override
    public Flux<DataBuffer> read(long start, long count, DataBufferFactory factory) {
      long n = Math.min(count, size - start);
      if (n <= 0) {
        return Flux.empty();
      }
      Optional<HttpRange> range =
          start == 0 && n == size ? Optional.empty() : Optional.of(HttpRange.createByteRange(start, start + n - 1));
      // The SDK's buffers are copied into the factory's, in chunks of at most 64 KiB.
      return objects.open(key(digest), range, size)
          .concatMapIterable(b -> copy(b, factory))
          .doOnError(S3Objects::notFound, e -> vanished(digest));
    }

    @Override
    public Optional<Path> file() {
      return Optional.empty();
    }

    /** A presigned GET of the object when {@code storage.s3.redirect} is on. */
    @Override
    public Optional<URI> redirect() {
      return redirect ? Optional.of(objects.presignGet(key(digest))) : Optional.empty();
    }
  }

  private static List<DataBuffer> copy(ByteBuffer b, DataBufferFactory factory) {
    List<DataBuffer> out = new ArrayList<>((b.remaining() + CHUNK - 1) / CHUNK);
    while (b.hasRemaining()) {
      int n = Math.min(CHUNK, b.remaining());
      ByteBuffer slice = b.slice(b.position(), n);
      out.add(factory.allocateBuffer(n).write(slice));
      b.position(b.position() + n);
    }
    return out;
  }
}
