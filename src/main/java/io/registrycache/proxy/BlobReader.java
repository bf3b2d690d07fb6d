package io.registrycache.proxy;

import io.netty.buffer.ByteBuf;
import io.netty.buffer.Unpooled;
import io.netty.util.ReferenceCountUtil;
import io.registrycache.storage.ContentWriter;
import java.io.IOException;
import java.nio.channels.FileChannel;
import java.nio.file.NoSuchFileException;
import java.util.function.Supplier;
import org.springframework.core.io.buffer.DataBuffer;
import org.springframework.core.io.buffer.DataBufferFactory;
import org.springframework.core.io.buffer.NettyDataBufferFactory;
import reactor.core.publisher.Flux;
import reactor.core.publisher.Mono;
import reactor.core.scheduler.Scheduler;

/**
 * One client's reading of a blob download ({@link BlobDownload#read}), in steps, each decided on
 * what the {@link FillWindow} holds when it starts:
 *
 * <ul>
 *   <li>the next bytes are only in the file (written, and gone from memory: the reader joined late
 *       or fell behind): read up to {@value ReaderBuffers#BUFFER_BYTES} bytes from it, on the
 *       storage scheduler;
 *   <li>they are in memory: copy up to that many of them;
 *   <li>it has all there is: wait until the window changes (more bytes, the blob verified, the
 *       download failed).
 * </ul>
 *
 * <p>Each step that sends bytes first takes a buffer from {@link ReaderBuffers} (the server's
 * responses), so the direct memory all readers hold is bounded in bytes, and a received buffer is
 * never pinned by a response still queued. Steps repeat until the blob is verified and the range
 * read. A reader holds no queue of its own and never holds up the fill or another reader beyond the
 * fill's pacing ({@link FillWindow#paced}). Errors are the download's own failure (its OCI code
 * kept), or an {@link IOException} for a file this reader could not read or a buffer it could not
 * get.
 */
final class BlobReader {

  private final FillWindow window;
  private final Supplier<ContentWriter> writer;
  private final Scheduler scheduler;
  private final String description;
  private final DataBufferFactory factory;
  private final ReaderBuffers.Share buffers;
  private final FillReaders.Position position;
  private volatile boolean done;
  private final Object fileLock = new Object();
  // Guarded by fileLock:
  private FileChannel file;
  private boolean closed;

  /**
   * @param writer the download's store writer, whose file is read
   * @param scheduler where file reads run (never a Netty event loop)
   * @param endExclusive one past the last byte wanted, or -1 for the blob's end
   * @param factory the response's buffers: a {@link NettyDataBufferFactory} gets the bytes in
   *     {@code buffers}' direct buffers; any other gets them copied into its own
   */
  BlobReader(
      FillWindow window,
      Supplier<ContentWriter> writer,
      Scheduler scheduler,
      String description,
      long start,
      long endExclusive,
      DataBufferFactory factory,
      ReaderBuffers buffers) {
    this.window = window;
    this.writer = writer;
    this.scheduler = scheduler;
    this.description = description;
    this.factory = factory;
    this.buffers = buffers.share();
    this.position = window.open(start, endExclusive);
  }

  /** The bytes, in the factory's buffers; subscribe once. */
  Flux<DataBuffer> bytes() {
    return Mono.defer(this::step)
        .repeat(() -> !done)
        .map(this::wrap)
        .doOnDiscard(ByteBuf.class, ReferenceCountUtil::safeRelease);
  }

  /**
   * Ends the reader: its file is closed, and it no longer paces the fill. Returns the readers left.
   */
  int close() {
    synchronized (fileLock) {
      closed = true;
      if (file != null) {
        try {
          file.close();
        } catch (IOException ignored) {
          // read-only channel
        }
      }
    }
    return window.close(position);
  }

  /** One buffer of bytes, or nothing (the reader waited for a change, or is done). */
  private Mono<ByteBuf> step() {
    FillWindow.View v = window.view();
    if (v.state() == FillWindow.State.FAILED) {
      return Mono.error(v.failure());
    }
    long end = position.end();
    if (v.verified()) {
      end = Math.min(end, v.received());
    } else if (v.size() >= 0) {
      end = Math.min(end, v.size());
    }
    long next = position.next();
    if (v.verified() && next >= end) {
      done = true;
      return Mono.empty();
    }
    long limit = Math.min(end, v.readable());
    if (next >= limit) {
      return window.changedSince(v.version()).then(Mono.empty());
    }
    if (next < v.memoryStart()) {
      long upTo = Math.min(limit, v.written());
      return take(upTo - next)
          .flatMap(b -> Mono.fromCallable(() -> readFile(b, upTo)).subscribeOn(scheduler));
    }
    return take(limit - next)
        .flatMap(
            b -> {
              if (window.copy(position, limit, b) > 0) {
                return Mono.just(b);
              }
              b.release(); // gone from memory meanwhile: the next step reads the file
              return Mono.empty();
            });
  }

  /**
   * An empty buffer for one step's bytes: one of {@code buffers}' for a Netty response, else a heap
   * buffer of at most {@code wanted} bytes (up to {@value ReaderBuffers#BUFFER_BYTES}).
   */
  private Mono<ByteBuf> take(long wanted) {
    if (factory instanceof NettyDataBufferFactory) {
      return buffers.take();
    }
    return Mono.fromSupplier(
        () ->
            Unpooled.wrappedBuffer(new byte[(int) Math.min(wanted, ReaderBuffers.BUFFER_BYTES)])
                .clear());
  }

  /**
   * Reads the file into {@code b} from the reader's next byte up to {@code limit}, at most a
   * buffer's worth; null (the buffer released) once closed.
   */
  private ByteBuf readFile(ByteBuf b, long limit) throws IOException {
    long from = position.next();
    int n = (int) Math.min(b.writableBytes(), limit - from);
    synchronized (fileLock) {
      if (closed) {
        b.release();
        return null;
      }
      try {
        if (file == null) {
          file = (FileChannel) writer.get().openReader();
        }
        for (int got = 0; got < n; ) {
          int r = b.writeBytes(file, from + got, n - got);
          if (r < 0) {
            throw new IOException("unexpected end of " + description + " at byte " + (from + got));
          }
          got += r;
        }
      } catch (NoSuchFileException e) {
        b.release();
        FillWindow.View v = window.view();
        Throwable cause = v.failure() != null ? v.failure() : e;
        throw new IOException(
            "download of " + description + " failed: " + cause.getMessage(), cause);
      } catch (IOException | RuntimeException e) {
        b.release();
        throw e;
      }
    }
    window.advance(position, n);
    return b;
  }

  private DataBuffer wrap(ByteBuf b) {
    if (factory instanceof NettyDataBufferFactory netty) {
      return netty.wrap(b);
    }
    // a heap buffer of the step's size (take): its array becomes the response's, no second copy
    DataBuffer bytes = factory.wrap(b.nioBuffer());
    b.release();
    return bytes;
  }
}
