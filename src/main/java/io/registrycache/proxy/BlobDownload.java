package io.registrycache.proxy;

import io.registrycache.oci.Digest;
import io.registrycache.storage.BlobStore;
import io.registrycache.storage.ContentVerificationException;
import io.registrycache.upstream.UpstreamBlob;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.ByteBuffer;
import java.nio.channels.SeekableByteChannel;
import java.nio.file.NoSuchFileException;
import java.time.Duration;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.function.Supplier;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import org.springframework.core.io.buffer.DataBuffer;
import org.springframework.core.io.buffer.DataBufferFactory;
import org.springframework.core.io.buffer.DataBufferUtils;
import org.springframework.core.io.buffer.DefaultDataBufferFactory;
import reactor.core.Disposable;
import reactor.core.publisher.Flux;
import reactor.core.publisher.Mono;
import reactor.core.publisher.Sinks;
import reactor.core.scheduler.Scheduler;

/**
 * One blob being fetched from an upstream into the cache, shared by every client that asks for it
 * meanwhile (single-flight).
 *
 * <p>The upstream body goes into a {@link BlobStore.Writer}, which computes its digest. Readers tail the
 * growing file from the first byte on, so the first client and every later one receive bytes as
 * they arrive. The last byte is held back until the writer verified the size and digest: a reader
 * never sees a clean end of bad content — on a mismatch or a failed transfer it gets an error (its
 * connection is aborted) and nothing is kept. Readers get the last byte right after the check,
 * before the commit forces the file to disk and moves it atomically to its content address (or
 * uploads it): a 1 GiB blob's {@code fsync} is not in any client's transfer time. Open readers keep
 * reading the file (same inode).
 *
 * <p>The transfer does not depend on any client: it goes on when they disconnect, until {@code
 * orphanTimeout} has passed with no reader, so the next pull is a hit.
 */
public final class BlobDownload {

  private static final Logger log = LoggerFactory.getLogger(BlobDownload.class);
  private static final int CHUNK_BYTES = 256 * 1024;
  private static final Sinks.EmitFailureHandler RETRY_EMIT =
      Sinks.EmitFailureHandler.busyLooping(Duration.ofSeconds(1));

  /**
   * What readers may read: bytes {@code [0, readable)}; {@code verified} once all bytes are in and
   * their size and digest checked out (then {@code readable} is the blob's size).
   */
  private record Progress(long readable, boolean verified) {}

  private enum State {
    RUNNING,
    COMMITTED,
    FAILED
  }

  private final Digest digest;
  private final String description;
  private final BlobStore store;
  private final Supplier<Mono<UpstreamBlob>> source;
  private final Scheduler scheduler;
  private final Duration orphanTimeout;
  private final Runnable onEnd;
  private final Runnable onStored;
  private final boolean behindOwner;
  private final Object stateLock = new Object();
  private final AtomicInteger readers = new AtomicInteger();
  /** Readable bytes while running, then the verified size; completes on commit, errors on failure. */
  private final Sinks.Many<Progress> progress = Sinks.many().replay().latest();
  /** Emits the upstream's Content-Length (or -1) once the response headers arrived. */
  private final Sinks.One<Long> sizeSink = Sinks.one();

  private volatile State state = State.RUNNING;
  private volatile BlobStore.Writer writer;
  private volatile long expectedSize = -1;
  private volatile Throwable failure;
  private volatile Disposable transfer;
  private volatile Disposable orphanTimer;

  /**
   * @param digest the digest the bytes must have
   * @param description for log lines, e.g. {@code local/library/alpine@sha256:...}
   * @param store the blob store to commit into
   * @param source starts the upstream request when subscribed
   * @param scheduler where file-system work runs (never a Netty event loop)
   * @param orphanTimeout how long the transfer goes on with no reader
   * @param onEnd runs once when the download committed or failed (leaves the single-flight)
   */
  BlobDownload(
      Digest digest,
      String description,
      BlobStore store,
      Supplier<Mono<UpstreamBlob>> source,
      Scheduler scheduler,
      Duration orphanTimeout,
      Runnable onEnd) {
    this(digest, description, store, source, scheduler, orphanTimeout, () -> {}, onEnd);
  }

  /**
   * @param onStored runs on the storage scheduler once the blob is verified and stored, before
   *     any reader sees the end (links it where it was fetched for)
   */
  BlobDownload(
      Digest digest,
      String description,
      BlobStore store,
      Supplier<Mono<UpstreamBlob>> source,
      Scheduler scheduler,
      Duration orphanTimeout,
      Runnable onStored,
      Runnable onEnd) {
    this(digest, description, store, source, scheduler, orphanTimeout, onStored, onEnd, false);
  }

  /**
   * @param behindOwner the bytes come from the owner replica, which stores them too: a shared
   *     store writes them only if the owner's copy is not there ({@link BlobStore#newWriterBehindOwner})
   */
  BlobDownload(
      Digest digest,
      String description,
      BlobStore store,
      Supplier<Mono<UpstreamBlob>> source,
      Scheduler scheduler,
      Duration orphanTimeout,
      Runnable onStored,
      Runnable onEnd,
      boolean behindOwner) {
    this.behindOwner = behindOwner;
    this.onStored = onStored;
    this.digest = digest;
    this.description = description;
    this.store = store;
    this.source = source;
    this.scheduler = scheduler;
    this.orphanTimeout = orphanTimeout;
    this.onEnd = onEnd;
  }

  /**
   * The owner replica this download was reading from gave up; the bytes come from the upstream:
   * the writer stores them itself ({@link BlobStore.Writer#ownerGaveUp}).
   */
  void ownerGaveUp() {
    BlobStore.Writer w = writer;
    if (w != null) {
      w.ownerGaveUp();
    }
  }

  /** Starts the transfer; called once, by the single-flight that created it. */
  void start() {
    BlobStore.Writer out;
    try {
      out = behindOwner ? store.newWriterBehindOwner(digest) : store.newWriter(digest);
    } catch (IOException | RuntimeException e) {
      fail(new UncheckedIOException("cannot create a temporary file for " + description, asIo(e)), null);
      return;
    }
    writer = out;
    progress.emitNext(new Progress(0, false), RETRY_EMIT);
    transfer =
        source
            .get()
            .doOnNext(
                blob -> {
                  expectedSize = blob.size();
                  sizeSink.emitValue(blob.size(), RETRY_EMIT);
                })
            .flatMapMany(UpstreamBlob::body)
            .publishOn(scheduler, 8)
            .doOnDiscard(DataBuffer.class, DataBufferUtils::release)
            .doOnNext(buffer -> append(out, buffer))
            .then(Mono.fromRunnable(() -> commit(out)))
            .subscribe(null, error -> fail(error, out));
    armOrphanTimer();
  }

  private void append(BlobStore.Writer out, DataBuffer buffer) {
    try (DataBuffer.ByteBufferIterator it = buffer.readableByteBuffers()) {
      while (it.hasNext()) {
        out.append(it.next());
      }
    } catch (IOException e) {
      throw new UncheckedIOException("cannot write " + description, e);
    } finally {
      DataBufferUtils.release(buffer);
    }
    long written = out.written();
    long size = expectedSize;
    if (size >= 0 && written > size) {
      throw new ContentVerificationException(
          description + ": upstream sent more than its Content-Length of " + size + " bytes");
    }
    // Hold back the last byte of a known-size blob until the digest checked out.
    long readable = size >= 0 ? Math.min(written, size - 1) : written;
    progress.emitNext(new Progress(Math.max(readable, 0), false), RETRY_EMIT);
  }

  private void commit(BlobStore.Writer out) {
    // Throws (and drops the bytes) on a size or digest mismatch; readers then get the error.
    long verified = out.verify(expectedSize);
    progress.emitNext(new Progress(verified, true), RETRY_EMIT);
    long stored;
    try {
      stored = out.commit(expectedSize);
    } catch (IOException e) {
      throw new UncheckedIOException("cannot store " + description, e);
    }
    onStored.run();
    synchronized (stateLock) {
      if (state != State.RUNNING) {
        return; // stopped as an orphan meanwhile; the blob is stored all the same
      }
      state = State.COMMITTED;
    }
    onEnd.run();
    disposeOrphanTimer();
    log.debug("stored blob {} ({} bytes)", description, stored);
    progress.emitComplete(RETRY_EMIT);
  }

  private void fail(Throwable error, BlobStore.Writer out) {
    synchronized (stateLock) {
      if (state != State.RUNNING) {
        return;
      }
      // The bytes go before anyone can see FAILED: a reader that opens now must find nothing.
      if (out != null) {
        out.abort();
      }
      failure = error;
      state = State.FAILED;
    }
    onEnd.run();
    disposeOrphanTimer();
    log.warn("blob download {} failed, nothing kept: {}", description, error.toString());
    sizeSink.tryEmitError(error); // ignored when the size was already announced
    progress.emitError(error, RETRY_EMIT);
  }

  private static IOException asIo(Exception e) {
    return e instanceof IOException io ? io : new IOException(e);
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
    return progress.asFlux().last().map(Progress::readable);
  }

  /**
   * Streams bytes {@code [start, endInclusive]} of the blob as they arrive, in heap buffers;
   * completes only after the whole blob was verified, errors when it was not.
   *
   * @param start first byte offset (0-based)
   * @param endInclusive last byte offset, or -1 for "to the end"
   */
  public Flux<DataBuffer> read(long start, long endInclusive) {
    return read(start, endInclusive, DefaultDataBufferFactory.sharedInstance);
  }

  /**
   * As {@link #read(long, long)}, reading into buffers of {@code factory} (the server's, so Netty
   * writes its own pooled buffers without another copy).
   */
  public Flux<DataBuffer> read(long start, long endInclusive, DataBufferFactory factory) {
    return Flux.using(
        () -> openTail(factory).start(start),
        tail ->
            progress
                .asFlux()
                .onBackpressureLatest()
                .publishOn(scheduler, 1)
                .takeUntil(Progress::verified)
                .concatMap(p -> tail.readUpTo(endInclusive < 0 ? p.readable() : Math.min(p.readable(), endInclusive + 1)), 1)
                .doOnDiscard(DataBuffer.class, DataBufferUtils::release)
                .subscribeOn(scheduler),
        Tail::close);
  }

  private Tail openTail(DataBufferFactory factory) throws IOException {
    readers.incrementAndGet();
    disposeOrphanTimer();
    try {
      BlobStore.Writer w = writer;
      if (state == State.FAILED || w == null) {
        throw new IOException("download of " + description + " failed", failure);
      }
      return new Tail(w.openReader(), factory);
    } catch (NoSuchFileException e) {
      releaseReader();
      throw new IOException("download of " + description + " failed", failure != null ? failure : e);
    } catch (IOException | RuntimeException e) {
      releaseReader();
      throw e;
    }
  }

  private void releaseReader() {
    if (readers.decrementAndGet() == 0) {
      armOrphanTimer();
    }
  }

  private void armOrphanTimer() {
    if (state != State.RUNNING) {
      return;
    }
    disposeOrphanTimer();
    orphanTimer =
        Mono.delay(orphanTimeout)
            .subscribe(
                t -> {
                  if (readers.get() == 0 && state == State.RUNNING) {
                    Disposable d = transfer;
                    if (d != null) {
                      d.dispose();
                    }
                    fail(new IOException("no client has waited for " + orphanTimeout + "; download stopped"), writer);
                  }
                });
  }

  private void disposeOrphanTimer() {
    Disposable t = orphanTimer;
    if (t != null) {
      t.dispose();
    }
  }

  /** The digest being downloaded. */
  public Digest digest() {
    return digest;
  }

  /** A reader's position in the growing file. */
  private final class Tail {
    private final SeekableByteChannel channel;
    private final DataBufferFactory factory;
    private long cursor;

    Tail(SeekableByteChannel channel, DataBufferFactory factory) {
      this.channel = channel;
      this.factory = factory;
    }

    Tail start(long start) {
      this.cursor = start;
      return this;
    }

    Flux<DataBuffer> readUpTo(long limit) {
      return Flux.generate(
          sink -> {
            if (cursor >= limit) {
              sink.complete();
              return;
            }
            int n = (int) Math.min(CHUNK_BYTES, limit - cursor);
            DataBuffer buffer = factory.allocateBuffer(n);
            int read = 0;
            try (DataBuffer.ByteBufferIterator it = buffer.writableByteBuffers()) {
              while (read < n && it.hasNext()) {
                ByteBuffer target = it.next();
                target.limit(target.position() + Math.min(target.remaining(), n - read));
                while (target.hasRemaining()) {
                  int r = channel.position(cursor + read).read(target);
                  if (r < 0) {
                    break;
                  }
                  read += r;
                }
                if (target.hasRemaining()) {
                  break; // end of file
                }
              }
            } catch (IOException | RuntimeException e) {
              DataBufferUtils.release(buffer);
              sink.error(e);
              return;
            }
            if (read == 0) {
              DataBufferUtils.release(buffer);
              sink.error(new IOException("unexpected end of " + description + " at byte " + cursor));
              return;
            }
            buffer.writePosition(buffer.writePosition() + read);
            cursor += read;
            sink.next(buffer);
          });
    }

    void close() {
      try {
        channel.close();
      } catch (IOException ignored) {
        // read-only channel
      }
      releaseReader();
    }
  }
}
