package io.registrycache.proxy;

import io.netty.buffer.ByteBuf;
import io.netty.buffer.ByteBufAllocator;
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
 *       or fell behind): read up to {@value #FILE_READ_BYTES} bytes from it, on the storage
 *       scheduler;
 *   <li>they are in memory: take retained slices of the received buffers (no copy), as the client
 *       asks for them ({@link Flux#generate});
 *   <li>it has all there is: wait until the window changes (more bytes, the blob verified, the
 *       download failed).
 * </ul>
 *
 * <p>Steps repeat until the blob is verified and the range read. A reader holds no queue of its own
 * and never holds up the fill or another reader beyond the fill's pacing ({@link
 * FillWindow#paced}). Errors are the download's own failure (its OCI code kept), or an {@link
 * IOException} for a file this reader could not read.
 */
final class BlobReader {

  /**
   * Bytes read from the file per read: a response holds up to 32 of them in direct memory ({@code
   * RegistryCacheApplication#SEND_PREFETCH}) while its client drains them.
   */
  static final int FILE_READ_BYTES = 64 * 1024;

  private final FillWindow window;
  private final Supplier<ContentWriter> writer;
  private final Scheduler scheduler;
  private final String description;
  private final DataBufferFactory factory;
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
   */
  BlobReader(
      FillWindow window,
      Supplier<ContentWriter> writer,
      Scheduler scheduler,
      String description,
      long start,
      long endExclusive,
      DataBufferFactory factory) {
    this.window = window;
    this.writer = writer;
    this.scheduler = scheduler;
    this.description = description;
    this.factory = factory;
    this.position = window.open(start, endExclusive);
  }

  /** The bytes, in the factory's buffers; subscribe once. */
  Flux<DataBuffer> bytes() {
    return Flux.defer(this::step)
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

  private Flux<ByteBuf> step() {
    FillWindow.View v = window.view();
    if (v.state() == FillWindow.State.FAILED) {
      return Flux.error(v.failure());
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
      return Flux.empty();
    }
    long limit = Math.min(end, v.readable());
    if (next >= limit) {
      return window.changedSince(v.version()).thenMany(Flux.empty());
    }
    if (next < v.memoryStart()) {
      long upTo = Math.min(limit, v.written());
      return Mono.fromCallable(() -> readFile(upTo)).subscribeOn(scheduler).flux();
    }
    return Flux.generate(
        sink -> {
          ByteBuf slice = window.slice(position, limit);
          if (slice == null) {
            sink.complete();
            return;
          }
          sink.next(slice);
          if (position.next() >= limit) {
            sink.complete();
          }
        });
  }

  /**
   * Reads the file from the reader's next byte up to {@code limit}, at most {@value
   * #FILE_READ_BYTES} bytes; null once closed.
   */
  private ByteBuf readFile(long limit) throws IOException {
    long from = position.next();
    int n = (int) Math.min(FILE_READ_BYTES, limit - from);
    ByteBuf b = null;
    synchronized (fileLock) {
      if (closed) {
        return null;
      }
      try {
        if (file == null) {
          file = (FileChannel) writer.get().openReader();
        }
        // the response's own allocator where it has one (the server's pool), so its limits apply
        b =
            (factory instanceof NettyDataBufferFactory netty
                    ? netty.getByteBufAllocator()
                    : ByteBufAllocator.DEFAULT)
                .directBuffer(n);
        for (int got = 0; got < n; ) {
          int r = b.writeBytes(file, from + got, n - got);
          if (r < 0) {
            throw new IOException("unexpected end of " + description + " at byte " + (from + got));
          }
          got += r;
        }
      } catch (NoSuchFileException e) {
        release(b);
        FillWindow.View v = window.view();
        Throwable cause = v.failure() != null ? v.failure() : e;
        throw new IOException(
            "download of " + description + " failed: " + cause.getMessage(), cause);
      } catch (IOException | RuntimeException e) {
        release(b);
        throw e;
      } catch (OutOfMemoryError e) {
        // Netty's direct-memory limit (OutOfDirectMemoryError): this reader fails at once, instead
        // of the Error escaping the storage thread and the client waiting for its timeout.
        release(b);
        throw new IOException("no memory for the response's buffers: " + e.getMessage(), e);
      }
    }
    window.advance(position, n);
    return b;
  }

  private static void release(ByteBuf b) {
    if (b != null) {
      b.release();
    }
  }

  private DataBuffer wrap(ByteBuf b) {
    if (factory instanceof NettyDataBufferFactory netty) {
      return netty.wrap(b);
    }
    byte[] bytes = new byte[b.readableBytes()];
    b.readBytes(bytes);
    b.release();
    return factory.wrap(bytes);
  }
}
