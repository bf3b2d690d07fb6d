package io.registrycache.proxy;

import io.netty.buffer.ByteBuf;
import io.netty.buffer.Unpooled;
import io.registrycache.storage.ContentVerificationException;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.List;
import org.springframework.core.io.buffer.DataBuffer;
import org.springframework.core.io.buffer.DataBufferUtils;
import org.springframework.core.io.buffer.NettyDataBuffer;
import reactor.core.publisher.Mono;
import reactor.core.publisher.MonoSink;
import reactor.core.publisher.Sinks;

/**
 * What one blob download has received, written and verified, the received bytes still in memory,
 * and where each of its readers is: the state the fill and its readers share, under one lock.
 *
 * <p>A received buffer stays here until the store has written it and the fastest reader has passed
 * it (so a reader keeping up never reads the file back); the one holding the last byte of a blob of
 * known size stays until the blob is verified, and readers see that last byte only then. A download
 * that fails releases them all. Readers copy what they take into buffers of their own ({@link
 * ReaderBuffers}), so a received buffer leaves memory as soon as it is written and passed.
 *
 * <p>Readers wait for a change with {@link #changedSince}; the fill waits for its fastest reader
 * with {@link #paced} ({@link FillReaders}, guarded by the same lock). Both are {@link Mono}s
 * completed outside the lock.
 */
final class FillWindow {

  /** Received bytes {@code [offset, offset + buf.readableBytes())}. */
  record Chunk(ByteBuf buf, long offset) {
    long end() {
      return offset + buf.readableBytes();
    }
  }

  enum State {
    RUNNING,
    VERIFIED,
    COMMITTED,
    FAILED
  }

  /**
   * The window as one reader step sees it.
   *
   * @param memoryStart first offset still in memory ({@code received} when none is)
   * @param readable bytes a reader may have now: all received, but the last byte of a blob of known
   *     size only once verified
   * @param size the announced size in bytes, or -1
   * @param version changes whenever {@code received} or {@code state} does
   */
  record View(
      State state,
      Throwable failure,
      long received,
      long written,
      long memoryStart,
      long readable,
      long size,
      long version) {
    boolean verified() {
      return state == State.VERIFIED || state == State.COMMITTED;
    }
  }

  /**
   * What to do once the lock is let go: buffers to release, readers to wake, the fill to resume.
   */
  private static final class After {
    final List<ByteBuf> release = new ArrayList<>(0);
    List<MonoSink<Void>> wake = List.of();
    Sinks.Empty<Void> resume;

    void run() {
      wake.forEach(MonoSink::success);
      if (resume != null) {
        resume.tryEmitEmpty();
      }
      release.forEach(ByteBuf::release);
    }
  }

  private final String description;
  private final Object lock = new Object();
  // Guarded by lock:
  private final ArrayDeque<Chunk> chunks = new ArrayDeque<>();
  private final FillReaders readers = new FillReaders();
  private List<MonoSink<Void>> waiters = new ArrayList<>();
  private long received;
  private long written;
  private long size = -1;
  private long version;
  private State state = State.RUNNING;

  /** {@link #fail} began: nothing more is written, verified or stored. */
  private boolean failing;

  private Throwable failure;

  /**
   * @param description for errors, e.g. {@code local/library/alpine@sha256:...}
   */
  FillWindow(String description) {
    this.description = description;
  }

  /**
   * Bytes held in memory: received and not yet written, or not yet passed by the fastest reader.
   */
  long buffered() {
    synchronized (lock) {
      Chunk first = chunks.peekFirst();
      return first == null ? 0 : received - first.offset();
    }
  }

  View view() {
    synchronized (lock) {
      Chunk first = chunks.peekFirst();
      return new View(
          state,
          failure,
          received,
          written,
          first != null ? first.offset() : received,
          readable(),
          size,
          version);
    }
  }

  State state() {
    synchronized (lock) {
      return state;
    }
  }

  long received() {
    synchronized (lock) {
      return received;
    }
  }

  /** Readers reading now. */
  int readers() {
    synchronized (lock) {
      return readers.count();
    }
  }

  private long readable() {
    if (state == State.VERIFIED || state == State.COMMITTED || size < 0) {
      return received;
    }
    return Math.min(received, size - 1);
  }

  /** Sets the size the upstream announced (-1: unknown), before the first byte. */
  void size(long announced) {
    synchronized (lock) {
      size = announced;
    }
  }

  /**
   * Takes over one received buffer (a Netty buffer as it is, others copied) and wakes the readers
   * waiting for bytes.
   *
   * @return the buffer's chunk, or null (empty, or the download failed: the buffer is released)
   * @throws ContentVerificationException when it goes past the announced size (the buffer is
   *     released)
   */
  Chunk add(DataBuffer buffer) {
    ByteBuf buf;
    if (buffer instanceof NettyDataBuffer netty) {
      buf = netty.getNativeBuffer(); // takes over the buffer's reference
    } else {
      byte[] bytes = new byte[buffer.readableByteCount()];
      buffer.read(bytes);
      DataBufferUtils.release(buffer);
      buf = Unpooled.wrappedBuffer(bytes);
    }
    int n = buf.readableBytes();
    After after = new After();
    Chunk chunk;
    synchronized (lock) {
      if (state != State.RUNNING || n == 0) {
        buf.release();
        return null;
      }
      if (size >= 0 && received + n > size) {
        buf.release();
        throw new ContentVerificationException(
            description + ": upstream sent more than its Content-Length of " + size + " bytes");
      }
      chunk = new Chunk(buf, received);
      chunks.addLast(chunk);
      received += n;
      after.wake = changed();
    }
    after.run();
    return chunk;
  }

  /**
   * Copies into {@code target} the received bytes from the reader's next one on, up to {@code
   * limit} or the target's end, and moves the reader past them.
   *
   * @return the bytes copied: 0 when the reader's next byte is not in memory (or is {@code limit})
   */
  int copy(FillReaders.Position reader, long limit, ByteBuf target) {
    int copied = 0;
    After after = new After();
    synchronized (lock) {
      long from = reader.next();
      for (Chunk c : chunks) {
        if (c.end() <= from) {
          continue;
        }
        if (c.offset() > from || from >= limit || !target.isWritable()) {
          break;
        }
        int n = (int) Math.min(Math.min(c.end(), limit) - from, target.writableBytes());
        target.writeBytes(c.buf(), c.buf().readerIndex() + (int) (from - c.offset()), n);
        from += n;
        copied += n;
      }
      if (copied > 0) {
        reader.moveTo(from);
        moved(after);
      }
    }
    after.run();
    return copied;
  }

  /** Moves a reader on after it read {@code n} bytes from the file. */
  void advance(FillReaders.Position reader, int n) {
    After after = new After();
    synchronized (lock) {
      reader.moveTo(reader.next() + n);
      moved(after);
    }
    after.run();
  }

  /** A reader moved on or left: the fill may go on, buffers it passed may go; under lock. */
  private void moved(After after) {
    after.resume = readers.resumable(received);
    if (state != State.FAILED) {
      releaseBehind(after.release);
    }
  }

  /** Retains {@code batch} for a write; false (nothing retained) once the download failed. */
  boolean pin(List<Chunk> batch) {
    synchronized (lock) {
      if (failing) {
        return false;
      }
      batch.forEach(c -> c.buf().retain());
      return true;
    }
  }

  /** The store wrote everything before {@code upTo}. */
  void written(long upTo) {
    After after = new After();
    synchronized (lock) {
      if (failing) {
        return;
      }
      written = upTo;
      releaseBehind(after.release);
    }
    after.run();
  }

  /**
   * Takes out of memory (into {@code done}, to release outside the lock) the buffers the store
   * wrote and the fastest reader still wanting bytes has passed: a reader keeping up never reads
   * the file back. The one with the last byte stays until the blob is verified. Under lock.
   */
  private void releaseBehind(List<ByteBuf> done) {
    long fastest = readers.fastest();
    long keep = fastest < 0 ? written : Math.min(written, fastest);
    for (Chunk c = chunks.peekFirst(); c != null && c.end() <= keep; c = chunks.peekFirst()) {
      if (state == State.RUNNING && size >= 0 && c.end() == size) {
        break;
      }
      done.add(chunks.pollFirst().buf());
    }
  }

  /**
   * The size and digest checked out, every byte is written: readers may have the last byte and end;
   * what no reader still needs leaves memory. False once failed.
   */
  boolean verified() {
    After after = new After();
    synchronized (lock) {
      if (state != State.RUNNING || failing) {
        return false;
      }
      state = State.VERIFIED;
      releaseBehind(after.release);
      after.wake = changed();
    }
    after.run();
    return true;
  }

  /**
   * Stored. What no reader still needs leaves memory, and the rest as readers pass it or leave.
   * False when the download was failed meanwhile.
   */
  boolean committed() {
    After after = new After();
    synchronized (lock) {
      if (state != State.VERIFIED || failing) {
        return false;
      }
      state = State.COMMITTED;
      releaseBehind(after.release);
    }
    after.run();
    return true;
  }

  /**
   * Fails the download unless it is stored or failing already: {@code first} runs under the lock
   * (the bytes go before any reader can hear of the failure), then {@code announce} outside it (the
   * download's own signals: the single-flight is left before a reader retries), then the readers
   * see the failure, the fill and the waiting readers are woken and the bytes in memory released.
   * Meanwhile nothing more is written, verified or stored.
   *
   * @return whether this call failed it
   */
  boolean fail(Throwable error, Runnable first, Runnable announce) {
    synchronized (lock) {
      if (failing || state == State.FAILED || state == State.COMMITTED) {
        return false;
      }
      failing = true;
      first.run();
    }
    announce.run();
    After after = new After();
    synchronized (lock) {
      state = State.FAILED;
      failure = error;
      after.wake = changed();
      after.resume = readers.resumable(Long.MIN_VALUE);
      chunks.forEach(c -> after.release.add(c.buf()));
      chunks.clear();
    }
    after.run();
    return true;
  }

  /**
   * Completes once the window changed from {@code seen} (a {@link View#version}), at once if it
   * has.
   */
  Mono<Void> changedSince(long seen) {
    return Mono.create(
        sink -> {
          boolean now;
          synchronized (lock) {
            now = version != seen;
            if (!now) {
              waiters.add(sink);
            }
          }
          if (now) {
            sink.success();
          } else {
            sink.onCancel(
                () -> {
                  synchronized (lock) {
                    waiters.remove(sink);
                  }
                });
          }
        });
  }

  private List<MonoSink<Void>> changed() {
    version++;
    List<MonoSink<Void>> wake = waiters;
    waiters = new ArrayList<>();
    return wake;
  }

  // ---- readers, and the fill's pace -------------------------------------------------------------

  /** A reader starts; returns its position. */
  FillReaders.Position open(long start, long endExclusive) {
    synchronized (lock) {
      return readers.open(start, endExclusive);
    }
  }

  /** A reader ended; returns the number of readers left. */
  int close(FillReaders.Position reader) {
    After after = new After();
    int left;
    synchronized (lock) {
      left = readers.close(reader);
      moved(after);
    }
    after.run();
    return left;
  }

  /** Completes when the fill may read on ({@link FillReaders#pause}). */
  Mono<Void> paced() {
    synchronized (lock) {
      return state != State.RUNNING ? Mono.empty() : readers.pause(received);
    }
  }
}
