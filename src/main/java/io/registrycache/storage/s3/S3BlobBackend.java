package io.registrycache.storage.s3;

import io.registrycache.oci.Digest;
import io.registrycache.storage.BlobBackend;
import io.registrycache.storage.BlobSink;
import io.registrycache.storage.BlobWriter;
import io.registrycache.storage.LinkPersistence;
import io.registrycache.storage.StorageLayout;
import io.registrycache.storage.StoredContent;
import java.io.IOException;
import java.io.InterruptedIOException;
import java.io.UncheckedIOException;
import java.net.URI;
import java.nio.ByteBuffer;
import java.nio.file.Path;
import java.time.Clock;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.ScheduledFuture;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import java.util.function.Predicate;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import org.springframework.core.io.buffer.DataBuffer;
import org.springframework.core.io.buffer.DataBufferFactory;
import org.springframework.core.io.buffer.DataBufferUtils;
import org.springframework.http.HttpRange;
import reactor.core.publisher.Flux;
import reactor.core.publisher.Mono;
import reactor.core.scheduler.Schedulers;

/**
 * Blobs in an S3-API object store, content-addressed under {@code <prefix>blobs/<algorithm>/<hex>}
 * (issue 11): the object-store {@link BlobBackend}, interchangeable with the file-system one
 * ({@link S3BlobStore} is the store over it).
 *
 * <p><b>Writing.</b> A fill writes the local temporary file it writes on the file-system store
 * ({@link BlobWriter}, which verifies size and digest in {@code commit}; clients joined to the fill
 * tail that file), and uploads it as it grows: each time {@code storage.s3.part-size} bytes are in
 * the file beyond what was sent, that region goes as the next part of a multipart upload (started
 * with the first part, straight from the file; at most {@value #MAX_PARTS_IN_FLIGHT} parts in
 * flight, the fill waits beyond that). At commit, once verified, the rest goes as the last part and
 * the upload is completed to the final key; a blob smaller than one part is one PUT of the verified
 * file. A mismatch, an upstream error or an abort aborts the upload, so no object ever appears
 * under a final key unverified. Uploads of a replica killed mid-fill are aborted by that replica at
 * its restart (it records its uploads under {@code storage.path}: {@link OwnUploads}), by the next
 * writer that stores the same blob (it aborts the key's other uploads), and in any case when older
 * than {@code storage.s3.abandoned-upload-age}, at start-up and every half of that age. After the
 * commit the temporary file stays for the delete grace (at least 30 s) for readers that join the
 * finished fill, then goes: it is the local tier of the fill only.
 *
 * <p><b>Index.</b> As on the file system, the store's whole index (digest → size, created,
 * last-pulled; about 150 bytes a blob) is in memory, loaded at start-up by listing {@code blobs/}
 * ({@link #scan}: one request per 1,000 blobs, 32 prefixes at once), so the hit path makes no
 * request before the transfer ({@link #open}), and eviction, the admin API and metrics see every
 * blob. Not a bounded cache with HEAD on a miss: a HEAD per miss would cost a round trip on every
 * cold pull, and the budget and LRU eviction need the full picture. The store lists again every
 * {@code storage.s3.index-refresh} (default 5 min, {@link #rescanEvery}); in between, a blob
 * another replica stored is found by one HEAD when a request finds it missing ({@link #stat}).
 * Last-pulled times are kept in the bucket when an {@link S3LastPulls} is given (batched, one
 * object per replica and {@code storage.s3.access-flush}; read back by the listing), else in memory
 * only. A blob whose object another replica removed fails the one read that finds it gone and
 * leaves the index then (the next request refills it).
 *
 * <p><b>Links.</b> Where a blob may be served ({@code ContentLinks}) is kept in the bucket too
 * ({@link S3Links}), so a replica that starts empty, or offline, serves what another linked; they
 * are looked up on a blob's first use here (one HEAD), not listed at start-up.
 *
 * <p><b>Reading.</b> {@link StoredContent} without a file: whole or ranged GETs of the object,
 * streamed through the replica; with {@code storage.s3.redirect}, a presigned URL of the object
 * that the registry API answers with a 307 ({@link StoredContent#redirect}). With {@code
 * storage.s3.local-tier-size}, a verified local copy ({@link S3LocalTier}) when there is one — a
 * file, sent zero-copy — and otherwise the object, while a copy is downloaded in the background.
 */
public final class S3BlobBackend implements BlobBackend {

  private static final Logger log = LoggerFactory.getLogger(S3BlobBackend.class);

  /** Key prefix (under the store's prefix) of blobs. */
  public static final String BLOBS = "blobs/";

  /** Longest wait for one object-store operation from a blocking caller. */
  static final Duration REQUEST_TIMEOUT = Duration.ofMinutes(10);

  /**
   * When a fill behind an owner looks for the owner's object before uploading its own: about 4 s in
   * all.
   */
  static final List<Duration> OWNER_COPY_WAITS =
      List.of(
          Duration.ZERO,
          Duration.ofMillis(100),
          Duration.ofMillis(250),
          Duration.ofMillis(500),
          Duration.ofSeconds(1),
          Duration.ofSeconds(2));

  /**
   * The waits in use: {@link #OWNER_COPY_WAITS} unless a test shortened them ({@link
   * #ownerCopyWaits(List)}).
   */
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
  private final long tierBytes;
  private final Duration abandonedUploadAge;
  private final Duration indexRefresh;
  private final boolean redirect;

  /** The store's index; set by {@link #started}. */
  private volatile Index index;

  private final AtomicLong uploadsSkipped = new AtomicLong();
  private final AtomicLong uploadsBehindOwner = new AtomicLong();
  private final ScheduledExecutorService executor;
  private volatile ScheduledFuture<?> sweeper;

  /**
   * Local copies of blobs ({@code storage.s3.local-tier-size}); null when off (or before {@link
   * #started}).
   */
  private volatile S3LocalTier tier;

  /** This replica's record of the uploads it started and has not finished. */
  private final OwnUploads ownUploads;

  private final AtomicLong othersUploadsAborted = new AtomicLong();

  /** Last pulls kept in the bucket; null when they live in memory only. */
  private final S3LastPulls lastPulls;

  /**
   * {@link System#nanoTime} of the latest {@link #dropped}: a delete's re-check reads records newer
   * than it.
   */
  private volatile long lastDropNanos = System.nanoTime();

  /**
   * A backend over {@code objects}; the listing is {@link #scan}'s, the clean-up of uploads and the
   * local tier start with {@link #started}.
   *
   * @param objects the bucket and prefix
   * @param layout local folders: temporary files of fills, upload records, the local tier
   * @param clock source of times
   * @param deleteGrace how long a fill's temporary file stays for late readers (at least 30 s)
   * @param properties part size, abandoned-upload age, index refresh, local tier, redirect
   */
  public S3BlobBackend(
      S3Objects objects,
      StorageLayout layout,
      Clock clock,
      Duration deleteGrace,
      S3StorageProperties properties) {
    this(objects, layout, clock, deleteGrace, properties, null);
  }

  /**
   * A backend that also keeps last pulls in the bucket ({@code lastPulls}, shared with the
   * manifests): recorded pulls are written every {@code storage.s3.access-flush}, read back by
   * {@link #scan}.
   *
   * @param lastPulls the bucket's pull records; {@code null}: last pulls in memory only
   */
  public S3BlobBackend(
      S3Objects objects,
      StorageLayout layout,
      Clock clock,
      Duration deleteGrace,
      S3StorageProperties properties,
      S3LastPulls lastPulls) {
    this.lastPulls = lastPulls;
    this.objects = objects;
    this.layout = layout;
    this.clock = clock;
    this.deleteGrace = deleteGrace;
    this.partSize = properties.partSize().toBytes();
    this.abandonedUploadAge = properties.abandonedUploadAge();
    this.indexRefresh = properties.indexRefresh();
    this.redirect = properties.redirect();
    this.tierBytes = redirect ? 0 : properties.localTierSize().toBytes();
    this.executor =
        Executors.newSingleThreadScheduledExecutor(
            r -> {
              Thread t = new Thread(r, "s3-blob-sweeper");
              t.setDaemon(true);
              return t;
            });
    try {
      this.ownUploads = new OwnUploads(layout);
    } catch (IOException e) {
      throw new UncheckedIOException(
          "cannot create the folder of upload records under " + layout.root(), e);
    }
  }

  /**
   * Starts the local tier (over the loaded index), aborts the uploads this replica left and those
   * older than {@code abandoned-upload-age}, and schedules that sweep. Blocking (start-up).
   */
  @Override
  public void started(Index index) {
    this.index = index;
    if (lastPulls != null) {
      lastPulls.start();
    }
    this.tier =
        tierBytes > 0
            ? new S3LocalTier(objects, layout, tierBytes, deleteGrace, index::size)
            : null;
    abortOwnLeftUploads();
    abortAbandonedUploads();
    long period = Math.max(1000, abandonedUploadAge.toMillis() / 2);
    this.sweeper =
        executor.scheduleWithFixedDelay(
            this::abortAbandonedUploads, period, period, TimeUnit.MILLISECONDS);
  }

  /**
   * Lists {@code blobs/}: one request per 1,000 blobs, 32 prefixes at once; created = the object's
   * last write, last pulled = the latest of that and the pulls recorded in the bucket by every
   * replica ({@link S3LastPulls}, read first), or the last write when they are not kept.
   */
  @Override
  public void scan(Found visitor) {
    if (lastPulls != null) {
      lastPulls.refresh();
    }
    objects
        .listContentWithSizes(BLOBS)
        .doOnNext(
            o -> {
              Optional<Digest> digest = digestOf(o.key());
              if (digest.isEmpty()) {
                log.warn("object store: skipping {}, not a blob key", o.key());
                return;
              }
              long created = o.lastModified().toEpochMilli();
              long pulled = created;
              if (lastPulls != null) {
                lastPulls.noteKnown(digest.get(), created);
                pulled = Math.max(created, lastPulls.lastPull(digest.get()).orElse(created));
              }
              visitor.found(digest.get(), o.size(), created, pulled);
            })
        .blockLast(REQUEST_TIMEOUT);
  }

  /**
   * Recorded for the next delta ({@link S3LastPulls#record}), written every {@code access-flush}.
   */
  @Override
  public void recordPulls(Map<Digest, Long> pulls) {
    if (lastPulls != null) {
      pulls.forEach(lastPulls::record);
    }
  }

  /** Whether last pulls are kept in the bucket ({@code S3LastPulls} given). */
  @Override
  public boolean recordsPulls() {
    return lastPulls != null;
  }

  /** A bucket is shared by the replicas. */
  @Override
  public boolean shared() {
    return true;
  }

  /**
   * Whether a pull of {@code digest} later than {@code millis} is recorded in the bucket: the
   * records are read again first unless they were read after the latest eviction (so the deletes of
   * one pass, which come at least two {@code access-flush} intervals after it, read them once).
   * {@code false} when the records cannot be read (logged): the delete then goes ahead, as it did
   * before they existed.
   */
  @Override
  public boolean pulledAfter(Digest digest, long millis) {
    if (lastPulls == null) {
      return false;
    }
    try {
      lastPulls.refreshUnlessSince(lastDropNanos); // once per eviction pass's deletes
    } catch (RuntimeException e) {
      log.warn(
          "object store: cannot read the pull records before deleting {}: {}",
          digest,
          e.toString());
    }
    return lastPulls.lastPull(digest).orElse(Long.MIN_VALUE) > millis;
  }

  /** {@link S3LastPulls#compact}. */
  @Override
  public void compactPulls(Predicate<Digest> keep) throws IOException {
    if (lastPulls != null) {
      lastPulls.compact(keep);
    }
  }

  /** {@code storage.s3.index-refresh}: other replicas store and evict in the same bucket. */
  @Override
  public Duration rescanEvery() {
    return indexRefresh;
  }

  @Override
  public LinkPersistence links() {
    return new S3Links(objects, "blobs", true);
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
        log.warn(
            "object store: cannot abort this replica's unfinished upload to {}, will try at the next start: {}",
            r.key(),
            e.toString());
      }
    }
    if (aborted > 0) {
      log.info(
          "object store: aborted {} multipart uploads this replica left unfinished (killed mid-fill)",
          aborted);
    }
    return aborted;
  }

  /**
   * Aborts every other multipart upload to the key of {@code digest}, whose object is now in the
   * bucket: the upload of an owner that died mid-fill (this replica took its blob over), or of a
   * concurrent writer of the same bytes, which then finds the object and keeps it. One LIST of the
   * key's uploads. Failures are logged: the {@code abandoned-upload-age} sweep remains.
   */
  private void abortOthersUploads(Digest digest, String ownUploadId) {
    try {
      List<S3Objects.OpenUpload> others =
          objects
              .uploadsTo(key(digest))
              .filter(u -> !u.uploadId().equals(ownUploadId))
              .collectList()
              .block(ABORT_TIMEOUT);
      for (S3Objects.OpenUpload u : others == null ? List.<S3Objects.OpenUpload>of() : others) {
        objects.abortUpload(u.key(), u.uploadId()).block(ABORT_TIMEOUT);
        othersUploadsAborted.incrementAndGet();
        log.info(
            "blob {}: aborted another writer's unfinished upload (started {}) now that the object is stored",
            digest,
            u.initiated());
      }
    } catch (RuntimeException e) {
      log.warn(
          "blob {}: cannot look for other writers' uploads to abort: {}", digest, e.toString());
    }
  }

  /** Uploads of other writers aborted because this replica stored their blob (since start-up). */
  public long othersUploadsAborted() {
    return othersUploadsAborted.get();
  }

  /** Aborts multipart uploads older than {@code abandoned-upload-age}: those of killed fills. */
  int abortAbandonedUploads() {
    try {
      Integer n =
          objects
              .abortUploadsStartedBefore(clock.instant().minus(abandonedUploadAge))
              .block(REQUEST_TIMEOUT);
      if (n != null && n > 0) {
        log.info("object store: aborted {} abandoned multipart uploads", n);
      }
      return n == null ? 0 : n;
    } catch (RuntimeException e) {
      log.warn("object store: cannot abort abandoned uploads, will try again: {}", e.toString());
      return 0;
    }
  }

  /** The local tier, when {@code storage.s3.local-tier-size} turned it on (tests). */
  Optional<S3LocalTier> localTier() {
    return Optional.ofNullable(tier);
  }

  /**
   * One {@code HEAD} of the blob's object: another replica may have stored it since the last
   * listing.
   */
  @Override
  public Mono<Optional<Long>> stat(Digest digest) {
    return objects.stat(key(digest)).map(info -> info.map(S3Objects.ObjectInfo::size));
  }

  /**
   * The local copy when the tier has one (sent zero-copy), else the object (and a copy made in the
   * background).
   */
  @Override
  public StoredContent open(Digest digest, long size) {
    S3LocalTier t = tier;
    if (t != null) {
      Optional<StoredContent> local = t.open(digest, size);
      if (local.isPresent()) {
        return local.get();
      }
      t.fillLater(digest, size);
    }
    return new StoredObject(digest, size);
  }

  /**
   * Uploads the blob's temporary file as it grows; several writers of one digest may exist at once:
   * each completes its own upload to the same key, the last wins, the bytes are the same. Behind an
   * owner: uploads nothing while the bytes arrive; at the commit the owner's object under the final
   * key (looked for for up to {@link #OWNER_COPY_WAITS}) makes the upload unnecessary, else the
   * verified file is uploaded then.
   */
  @Override
  public BlobSink sink(Digest digest, boolean behindOwner) {
    return new Upload(digest, behindOwner);
  }

  /**
   * The object-store side of one {@link BlobWriter}. Used by the writer's one thread, but {@link
   * #closed} may come from an aborting one.
   */
  private final class Upload implements BlobSink {
    private final Digest digest;
    private volatile S3Objects.Upload upload;

    /** This replica's record of {@link #upload} ({@link OwnUploads}); null before it starts. */
    private volatile Path record;

    /** Bytes sent as parts so far. */
    private long sent;

    /** The verified file {@link #store} made visible, and its size: the local tier adopts it. */
    private volatile Path storedTemp;

    private volatile long storedSize;

    /** Nothing sent yet: the owner replica is storing the same bytes (a fill behind an owner). */
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
          S3Objects.Upload started =
              S3Calls.await(objects.startUpload(key(digest)), REQUEST_TIMEOUT);
          record = ownUploads.record(started.key(), started.uploadId());
          upload = started;
        }
        // Backpressure: a fill outrunning the store waits here (and so reads its upstream slower).
        try {
          S3Calls.await(upload.partsInFlightAtMost(MAX_PARTS_IN_FLIGHT - 1), REQUEST_TIMEOUT);
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
      log.info(
          "blob {}: this fill's upload was aborted by another writer that stored the blob; checking its object at the commit",
          digest);
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
          log.info(
              "blob {}: the owner's object is not in the bucket after {}; uploading this replica's copy",
              digest,
              ownerCopyWaits.stream().reduce(Duration.ZERO, Duration::plus));
          appended(temp, size);
        }
        S3Objects.Upload u = upload;
        if (u == null) {
          S3Calls.await(objects.putFile(key(digest), temp, 0, size), REQUEST_TIMEOUT);
        } else {
          if (size > sent) {
            u.addPart(temp, sent, size - sent);
          }
          try {
            S3Calls.await(u.complete(), REQUEST_TIMEOUT);
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
      storedTemp = temp;
      storedSize = size;
      Duration keep = deleteGrace.compareTo(MIN_TEMP_GRACE) > 0 ? deleteGrace : MIN_TEMP_GRACE;
      deleteLater(temp, keep);
      return temp;
    }

    @Override
    public void ownerGaveUp() {
      behindOwner = false; // the next append uploads the parts so far, as a plain fill would have
    }

    @Override
    public void closed(boolean stored) {
      if (stored) {
        S3LocalTier t = tier;
        if (t
            != null) { // now that the store indexed it: the tier keeps copies of indexed blobs only
          t.adopt(digest, storedTemp, storedSize);
        }
        return;
      }
      S3Objects.Upload u = upload;
      if (u != null) {
        Path recorded = record;
        Mono<Void> abort =
            u.abort()
                .doOnError(
                    e -> log.warn("cannot abort upload of blob {}: {}", digest, e.toString()))
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
   * Whether the object of {@code digest} is in the bucket with {@code size} bytes, looked for until
   * {@link #OWNER_COPY_WAITS} are over: an owner completes its upload just after it sent the last
   * byte. An object under a final key is always verified content. Blocking.
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
      Optional<S3Objects.ObjectInfo> info =
          S3Calls.await(objects.stat(key(digest)), REQUEST_TIMEOUT);
      if (info.isPresent() && info.get().size() == size) {
        return true;
      }
    }
    return false;
  }

  /**
   * Fills behind an owner whose object was there at the commit, so nothing was uploaded (since
   * start-up).
   */
  public long uploadsSkipped() {
    return uploadsSkipped.get();
  }

  /**
   * Fills behind an owner whose object was not there at the commit, so this replica uploaded (since
   * start-up).
   */
  public long uploadsBehindOwner() {
    return uploadsBehindOwner.get();
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
   * bucket): the store drops it from the index, so the next request is a miss and fills it again.
   */
  private void vanished(Digest digest) {
    Index i = index;
    if (i != null) {
      i.gone(digest);
    }
  }

  /** The local copy goes with the blob's entry. */
  @Override
  public void dropped(Digest digest) {
    lastDropNanos = System.nanoTime();
    S3LocalTier t = tier;
    if (t != null) {
      t.remove(digest);
    }
  }

  /**
   * Deletes a finished fill's temporary file after {@code keep}; at once when the backend is
   * closed. Nothing waits for it, so a failure is logged here (WARN, with the file).
   */
  private void deleteLater(Path temp, Duration keep) {
    if (executor.isShutdown()) {
      StorageLayout.deleteQuietly(temp);
      return;
    }
    StorageLayout.later(
        keep,
        executor,
        () -> StorageLayout.deleteQuietly(temp),
        failure ->
            log.warn(
                "cannot delete the temporary file {} of a stored blob: {}",
                temp,
                failure.toString()));
  }

  /** Deletes the object of an evicted blob (called by the store after the delete grace). */
  @Override
  public void delete(Digest digest) {
    try {
      objects.delete(key(digest)).block(REQUEST_TIMEOUT);
    } catch (RuntimeException ex) {
      log.warn("object store: cannot delete evicted blob {}: {}", digest, ex.toString());
    }
  }

  /**
   * Stops the sweeper and the local tier. Finished fills' temporary files still waiting out their
   * grace stay; {@code tmp/} is emptied at the next start. Does not close {@link S3Objects}.
   */
  @Override
  public void close() {
    ScheduledFuture<?> s = sweeper;
    if (s != null) {
      s.cancel(false);
    }
    S3LocalTier t = tier;
    if (t != null) {
      t.close();
    }
    executor.shutdownNow();
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
          start == 0 && n == size
              ? Optional.empty()
              : Optional.of(HttpRange.createByteRange(start, start + n - 1));
      // The SDK's buffers are copied into the factory's, in chunks of at most 64 KiB.
      return objects
          .open(key(digest), range, size)
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
    try {
      while (b.hasRemaining()) {
        int n = Math.min(CHUNK, b.remaining());
        ByteBuffer slice = b.slice(b.position(), n);
        out.add(factory.allocateBuffer(n).write(slice));
        b.position(b.position() + n);
      }
    } catch (OutOfMemoryError e) {
      // Netty's direct-memory limit (OutOfDirectMemoryError). Reactor treats an Error as fatal and
      // rethrows it on the SDK's thread, so the response would hang until the client gives up
      // (seen in the chaos soak); an exception fails this one response instead.
      out.forEach(DataBufferUtils::release);
      throw new UncheckedIOException(
          new IOException("no memory for the response's buffers: " + e.getMessage(), e));
    }
    return out;
  }
}
