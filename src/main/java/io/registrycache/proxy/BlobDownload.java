package io.registrycache.proxy;

import io.netty.buffer.ByteBuf;
import io.registrycache.oci.Digest;
import io.registrycache.storage.ContentVerificationException;
import io.registrycache.storage.ContentWriter;
import io.registrycache.tracing.PullSpan;
import io.registrycache.upstream.UpstreamBlob;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.ByteBuffer;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.Callable;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import org.springframework.core.io.buffer.DataBuffer;
import org.springframework.core.io.buffer.DataBufferFactory;
import org.springframework.core.io.buffer.DataBufferUtils;
import org.springframework.core.io.buffer.DefaultDataBufferFactory;
import org.springframework.core.io.buffer.NettyDataBufferFactory;
import reactor.core.Disposable;
import reactor.core.publisher.Flux;
import reactor.core.publisher.Mono;
import reactor.core.publisher.Sinks;
import reactor.core.scheduler.Scheduler;
import reactor.util.retry.Retry;

/**
 * One blob being fetched into the cache, shared by every client that asks for it meanwhile
 * (single-flight). The fill is one Reactor pipeline: the upstream body (resumed with a Range
 * request when it breaks off) → each buffer into the {@link FillWindow}, where every reader can
 * take it at once → batches of {@value #WRITE_BATCH_BYTES} bytes appended by the store (hashing as
 * it writes) on a storage thread, one gathering write each → verify → commit. The store's pace
 * holds the upstream through the pipeline's own backpressure: at most about {@value
 * #MAX_UNWRITTEN_BYTES} bytes are received and not yet written.
 *
 * <p>Readers ({@link BlobReader}) copy the received bytes into buffers of a budget shared by every
 * response ({@link ReaderBuffers}), or read the file for bytes no longer in memory (joined late,
 * fell behind): a slow client stalls neither the fill nor the other readers. The fill goes at most
 * {@value #PACE_BYTES} bytes ahead of its fastest reader ({@link FillReaders}), so a reader that
 * keeps up takes every byte from memory.
 *
 * <p>The last byte of a blob of known size is held back until the store verified the size and
 * digest: a reader never sees a clean end of bad content — on a mismatch or a failed transfer it
 * gets an error (its connection is aborted) and nothing is kept. Readers get the last byte right
 * after the check, before the commit forces the file to disk and moves it to its content address
 * (or uploads it): a 1 GiB blob's {@code fsync} is in no client's transfer time.
 *
 * <p>The transfer does not depend on any client: it goes on when they disconnect, until {@code
 * orphanTimeout} has passed with no reader, so the next pull is a hit. Flows one way: whoever
 * started the download learns its outcome from {@link #completion()}.
 */
public final class BlobDownload {

  private static final Logger log = LoggerFactory.getLogger(BlobDownload.class);

  /**
   * Bytes appended to the store per write (one gathering write, one storage-thread task). With
   * {@link #WRITES_QUEUED} it bounds the direct memory a fill holds (the upstream's buffers), which
   * every concurrent fill pays: a service with 32 MiB of direct memory runs a dozen large fills.
   */
  static final int WRITE_BATCH_BYTES = 512 * 1024;

  /** Write batches queued for the storage thread; the upstream is not read further meanwhile. */
  private static final int WRITES_QUEUED = 2;

  /**
   * About the most bytes received and not yet written: batches queued, one gathered, the prefetch.
   */
  static final int MAX_UNWRITTEN_BYTES = (WRITES_QUEUED + 2) * WRITE_BATCH_BYTES;

  /** Bytes the fill may be ahead of its fastest reader still wanting bytes. */
  static final int PACE_BYTES = 1 << 20;

  /** Upstream buffers requested at a time (each up to the upstream connection's largest read). */
  private static final int UPSTREAM_PREFETCH = 4;

  /** Where a download's bytes come from. */
  @FunctionalInterface
  public interface Source {
    /**
     * Starts the request for the blob's bytes from {@code offset} on.
     *
     * @param offset the first byte wanted: 0, or where a transfer that broke off resumes
     * @param ownerGaveUp to call when bytes meant to come from the owner replica come from the
     *     upstream instead ({@link ContentWriter#ownerGaveUp})
     * @return the whole blob's size (-1 when unknown) and the body from {@code offset}, unverified
     */
    Mono<UpstreamBlob> open(long offset, Runnable ownerGaveUp);
  }

  /** The upstream body broke off after it began: the one error a resume may follow. */
  private static final class BrokeOff extends RuntimeException {
    BrokeOff(Throwable cause) {
      super(cause.getMessage(), cause, false, false);
    }
  }

  private final Digest digest;
  private final String description;
  private final Callable<ContentWriter> newWriter;
  private final Source source;
  private final Scheduler scheduler;
  private final ReaderBuffers buffers;
  private final Duration orphanTimeout;
  private final int resumeAttempts;
  private final FillWindow window;

  private volatile long expectedSize = -1;
  private volatile ContentWriter writer;

  /** Times the body was resumed so far. */
  private volatile int resumes;

  /** Bytes gathered into the write batch under way (the fill's thread only). */
  private long gathered;

  private final Sinks.One<Long> sizeSink = Sinks.one();
  private final Sinks.One<Long> completion = Sinks.one();
  private volatile Disposable fill;
  private volatile Disposable orphanTimer;

  /**
   * The span of the request that started this download, or {@code null} (tracing off, prefetch).
   */
  private volatile PullSpan trace;

  /**
   * {@code blob body}: from the first response headers to the last byte verified, or {@code null}.
   */
  private volatile PullSpan bodySpan;

  /**
   * @param digest the digest the bytes must have
   * @param description for log lines, e.g. {@code local/library/alpine@sha256:...}
   * @param newWriter the store's writer for the bytes (called once, on start)
   * @param source starts the upstream (or owner) request
   * @param scheduler where file-system work runs (never a Netty event loop)
   * @param buffers the direct buffers readers send from, shared by every download
   * @param orphanTimeout how long it goes on with no reader ({@code orphan-download-timeout})
   * @param resumeAttempts how often a broken transfer is resumed ({@code resume-attempts})
   */
  BlobDownload(
      Digest digest,
      String description,
      Callable<ContentWriter> newWriter,
      Source source,
      Scheduler scheduler,
      ReaderBuffers buffers,
      Duration orphanTimeout,
      int resumeAttempts) {
    this.digest = digest;
    this.description = description;
    this.newWriter = newWriter;
    this.source = source;
    this.scheduler = scheduler;
    this.buffers = buffers;
    this.orphanTimeout = orphanTimeout;
    this.resumeAttempts = Math.max(0, resumeAttempts);
    this.window = new FillWindow(description);
  }

  /**
   * Traces this download under {@code parent} (docs/tracing.md): its source's requests (upstream or
   * owner) and a {@code blob body} and a {@code storage commit} span. Called before {@link #start}.
   */
  void traced(PullSpan parent) {
    this.trace = parent;
  }

  /** The span {@link #traced} gave, or {@code null}. */
  PullSpan trace() {
    return trace;
  }

  /** Starts the transfer; called once, by the single-flight that created it. */
  void start() {
    armOrphanTimer();
    // The temporary file is created on a worker of the storage scheduler, as the fill's writes are
    // (start() runs on a request's event loop).
    fill =
        Mono.defer(() -> Mono.fromCallable(newWriter))
            .subscribeOn(scheduler)
            .onErrorMap(
                e ->
                    new UncheckedIOException(
                        "cannot create a temporary file for " + description,
                        e instanceof IOException io ? io : new IOException(e)))
            .doOnNext(w -> writer = w)
            .thenMany(
                Flux.defer(() -> body(window.received()))
                    .retryWhen(
                        Retry.max(resumeAttempts)
                            .filter(this::resumable)
                            .doBeforeRetry(
                                s -> {
                                  resumes = (int) s.totalRetries() + 1;
                                  log.warn(
                                      "blob download {} broke off after {} of {} bytes ({}); resuming from there, attempt {} of {}",
                                      description,
                                      window.received(),
                                      expectedSize,
                                      s.failure().getCause(),
                                      resumes,
                                      resumeAttempts);
                                })
                            .onRetryExhaustedThrow((spec, s) -> s.failure()))
                    .onErrorMap(BrokeOff.class, Throwable::getCause))
            .<FillWindow.Chunk>handle(
                (buffer, sink) -> {
                  try {
                    FillWindow.Chunk chunk = window.add(buffer);
                    if (chunk != null) {
                      sink.next(chunk);
                    }
                  } catch (ContentVerificationException e) {
                    sink.error(e);
                  }
                })
            .concatMap(chunk -> window.paced().thenReturn(chunk), UPSTREAM_PREFETCH)
            .bufferUntil(this::batchFull)
            .publishOn(scheduler, WRITES_QUEUED)
            .doOnNext(this::write)
            .then(Mono.fromRunnable(this::verifyAndCommit))
            .doOnDiscard(DataBuffer.class, DataBufferUtils::release)
            .subscribe(null, this::fail);
  }

  /** Requests the bytes from {@code offset} on; the body's own errors come as {@link BrokeOff}. */
  private Flux<DataBuffer> body(long offset) {
    PullSpan t = trace;
    Mono<UpstreamBlob> opened = source.open(offset, this::ownerGaveUp);
    if (t != null) {
      opened = opened.contextWrite(t::into);
    }
    return opened.flatMapMany(
        blob -> {
          long size = expectedSize;
          if (offset > 0 && size >= 0 && blob.size() >= 0 && blob.size() != size) {
            blob.body().take(0).subscribe(); // lets the connection go
            return Flux.error(
                new ContentVerificationException(
                    description
                        + ": the upstream's size changed from "
                        + size
                        + " to "
                        + blob.size()
                        + " bytes"));
          }
          if (offset == 0) {
            expectedSize = blob.size();
            window.size(blob.size());
            try {
              writer.reserve(blob.size()); // before any reader sees a byte or the size
            } catch (IOException | RuntimeException e) {
              blob.body().take(0).subscribe();
              return Flux.error(e);
            }
            sizeSink.tryEmitValue(blob.size());
          }
          if (t != null && bodySpan == null) {
            bodySpan =
                t.child("blob body")
                    .tag("registry.digest", digest.toString())
                    .tag("registry.size", blob.size());
          }
          return blob.body().onErrorMap(BrokeOff::new);
        });
  }

  /**
   * A broken body is resumed from the next byte, keeping what was received (and the digest state).
   */
  private boolean resumable(Throwable error) {
    long size = expectedSize;
    return error instanceof BrokeOff
        && window.state() == FillWindow.State.RUNNING
        && !(size >= 0 && window.received() >= size);
  }

  private void ownerGaveUp() {
    ContentWriter w = writer;
    if (w != null) {
      w.ownerGaveUp();
    }
  }

  private boolean batchFull(FillWindow.Chunk chunk) {
    gathered += chunk.buf().readableBytes();
    if (gathered < WRITE_BATCH_BYTES) {
      return false;
    }
    gathered = 0;
    return true;
  }

  /**
   * The blob's size in bytes as the upstream announced it (-1 when it did not), once the upstream
   * answered; errors when the upstream request failed.
   */
  public Mono<Long> announcedSize() {
    return sizeSink.asMono();
  }

  /** Completes with the stored size when the blob is verified and stored; errors otherwise. */
  public Mono<Long> completion() {
    return completion.asMono();
  }

  /** The digest being downloaded. */
  public Digest digest() {
    return digest;
  }

  /**
   * Streams the whole blob as it arrives, in heap buffers; see {@link #read(long, long,
   * DataBufferFactory)}.
   */
  public Flux<DataBuffer> read(long start, long endInclusive) {
    return read(start, endInclusive, DefaultDataBufferFactory.sharedInstance);
  }

  /**
   * Streams bytes {@code [start, endInclusive]} of the blob as they arrive; completes only after
   * the whole blob was verified, errors when it was not. With {@code factory} the server's ({@link
   * NettyDataBufferFactory}) the bytes are the upstream's own buffers, no copy.
   *
   * @param start first byte offset (0-based)
   * @param endInclusive last byte offset, or -1 for "to the end"
   */
  public Flux<DataBuffer> read(long start, long endInclusive, DataBufferFactory factory) {
    return Flux.defer(
        () -> {
          BlobReader reader =
              new BlobReader(
                  window,
                  () -> writer,
                  scheduler,
                  description,
                  start,
                  endInclusive < 0 ? -1 : endInclusive + 1,
                  factory,
                  buffers);
          disposeOrphanTimer();
          return reader
              .bytes()
              .doFinally(
                  signal -> {
                    if (reader.close() == 0) {
                      armOrphanTimer();
                    }
                  });
        });
  }

  /** Bytes this download holds in memory now. */
  long bufferedBytes() {
    return window.buffered();
  }

  // ---- the store side (the fill's storage thread, one task at a time) ---------------------------

  private void write(List<FillWindow.Chunk> batch) {
    if (batch.isEmpty() || !window.pin(batch)) {
      return;
    }
    try {
      List<ByteBuffer> nio = new ArrayList<>(batch.size() + 2);
      for (FillWindow.Chunk c : batch) {
        ByteBuf b = c.buf();
        for (ByteBuffer part : b.nioBuffers(b.readerIndex(), b.readableBytes())) {
          nio.add(part);
        }
      }
      writer.append(nio.toArray(ByteBuffer[]::new));
    } catch (IOException e) {
      throw new UncheckedIOException("cannot write " + description, e);
    } finally {
      batch.forEach(c -> c.buf().release());
    }
    window.written(batch.get(batch.size() - 1).end());
  }

  private void verifyAndCommit() {
    if (window.state() != FillWindow.State.RUNNING) {
      return;
    }
    ContentWriter w = writer;
    // Throws (and drops the bytes) on a size or digest mismatch; readers then get the error.
    w.verify(expectedSize);
    PullSpan bs = bodySpan;
    if (bs != null) {
      bs.tag("registry.resumes", resumes).end();
    }
    if (!window.verified()) {
      return;
    }
    long stored;
    PullSpan t = trace;
    PullSpan commit =
        t == null ? null : t.child("storage commit").tag("registry.digest", digest.toString());
    try {
      stored = w.commit(expectedSize);
    } catch (IOException | RuntimeException e) {
      if (commit != null) {
        commit.error(e);
      }
      throw e instanceof IOException io
          ? new UncheckedIOException("cannot store " + description, io)
          : (RuntimeException) e;
    } finally {
      if (commit != null) {
        commit.end();
      }
    }
    if (!window.committed()) {
      return; // failed meanwhile; the blob is stored all the same
    }
    disposeOrphanTimer();
    log.debug("stored blob {} ({} bytes)", description, stored);
    completion.tryEmitValue(stored);
  }

  private void fail(Throwable error) {
    ContentWriter w = writer;
    window.fail(
        error,
        () -> {
          if (w != null) {
            w.abort();
          }
        },
        () -> {
          Disposable f = fill;
          if (f != null) {
            f.dispose();
          }
          PullSpan bs = bodySpan;
          if (bs != null) {
            bs.error(error).end();
          }
          disposeOrphanTimer();
          log.warn("blob download {} failed, nothing kept: {}", description, error.toString());
          sizeSink.tryEmitError(error); // ignored when the size was already announced
          completion.tryEmitError(error);
        });
  }

  private void armOrphanTimer() {
    if (window.state() != FillWindow.State.RUNNING) {
      return;
    }
    disposeOrphanTimer();
    orphanTimer =
        Mono.delay(orphanTimeout)
            .subscribe(
                tick -> {
                  if (window.readers() == 0 && window.state() == FillWindow.State.RUNNING) {
                    fail(
                        new IOException(
                            "no client has waited for " + orphanTimeout + "; download stopped"));
                  }
                });
  }

  private void disposeOrphanTimer() {
    Disposable t = orphanTimer;
    if (t != null) {
      t.dispose();
    }
  }
}
