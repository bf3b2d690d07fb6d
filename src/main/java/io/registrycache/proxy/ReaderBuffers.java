package io.registrycache.proxy;

import io.netty.buffer.ByteBuf;
import io.netty.buffer.UnpooledByteBufAllocator;
import io.netty.buffer.UnpooledDirectByteBuf;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.util.function.Supplier;
import org.springframework.util.unit.DataSize;
import reactor.core.publisher.Flux;
import reactor.core.publisher.Mono;
import reactor.pool.InstrumentedPool;
import reactor.pool.PoolBuilder;
import reactor.pool.PooledRef;

/**
 * The direct buffers every response streaming a blob that is still arriving sends from ({@link
 * BlobReader}): bytes copied out of the fill's memory, or read from its file. At most {@code
 * budget} bytes in all, in buffers of {@value #BUFFER_BYTES} bytes, whatever the number of readers:
 * a buffer is lent until the response's connection has written it (Netty releases it), then comes
 * back. A reader that finds every buffer lent waits for one, first come first served
 * (reactor-pool), while the fill and the readers holding buffers go on. One reader ({@link #share})
 * holds at most {@value #PER_READER} buffers at once, so a client that stops reading keeps no more
 * than that until its connection's write times out ({@code registry-cache.blobs.send-timeout}), and
 * the others go on.
 *
 * <p>Why a budget of its own: readers used to send slices of the upstream's receive buffers (up to
 * 1 MiB each), and a response may hold 32 buffers queued and being written, so ten readers at
 * different offsets of one large blob could pin far more than a 32 MiB {@code
 * -XX:MaxDirectMemorySize} and have Netty fail responses ({@code OutOfDirectMemoryError}).
 */
final class ReaderBuffers {

  /**
   * Bytes per buffer: one file read, or one copy out of the fill's memory. Chosen by bigblob (1
   * GiB, one client, quiet machine): 64 KiB cost 7.0 CPU s and 130 MB/s (a write and flush per 64
   * KiB), 256 KiB 5.9 s and 250 MB/s, slices of the upstream's buffers 4.5 s and 302 MB/s.
   */
  static final int BUFFER_BYTES = 256 * 1024;

  /**
   * Buffers one reader may hold at once: queued in its response and being written. 2 MiB keeps a
   * loopback client's socket busy; a stalled client pins no more.
   */
  static final int PER_READER = 8;

  private static final Object PERMIT = new Object();

  private final InstrumentedPool<ByteBuffer> pool;
  private final int max;

  /**
   * @param budget direct memory the buffers may take in all ({@code
   *     registry-cache.blobs.fill-response-memory}); at least one buffer
   */
  ReaderBuffers(DataSize budget) {
    this(budget, () -> ByteBuffer.allocateDirect(BUFFER_BYTES));
  }

  /**
   * @param allocate makes one buffer of {@value #BUFFER_BYTES} bytes (direct), when fewer than the
   *     budget's are made
   */
  ReaderBuffers(DataSize budget, Supplier<ByteBuffer> allocate) {
    this.max = (int) Math.max(1, Math.min(Integer.MAX_VALUE, budget.toBytes() / BUFFER_BYTES));
    this.pool =
        PoolBuilder.from(Mono.fromCallable(() -> allocate(allocate)))
            .sizeBetween(0, max)
            .releaseHandler(b -> Mono.fromRunnable(b::clear))
            .buildPool();
  }

  /**
   * The JVM's direct-memory limit becomes an {@link IOException}: the one reader fails at once
   * (Reactor rethrows an Error instead of signalling it, and its client would wait for a timeout).
   */
  private static ByteBuffer allocate(Supplier<ByteBuffer> allocate) throws IOException {
    try {
      return allocate.get();
    } catch (OutOfMemoryError e) {
      throw new IOException("no memory for the response's buffers: " + e.getMessage(), e);
    }
  }

  /**
   * An empty buffer of {@value #BUFFER_BYTES} bytes, when one is free: releasing it (to a reference
   * count of 0) gives it back. Errors with an {@link IOException} when a new buffer cannot be
   * allocated (the JVM's direct-memory limit).
   */
  Mono<ByteBuf> take() {
    // next() asks the pool once: it acquires again on every request(n), and operators downstream
    // pass a client's requests on (repeat, flatMap), even from inside onNext, which would leave
    // the extra buffers lent for good
    return Flux.from(pool.acquire()).next().map(ref -> new Lent(ref, null));
  }

  /**
   * One reader's share of the buffers: at most {@value #PER_READER} lent to it at once (a pool of
   * permits of its own, taken before a buffer and given back with it).
   */
  Share share() {
    return new Share();
  }

  /** A reader's view of the buffers; see {@link #share}. */
  final class Share {

    private final InstrumentedPool<Object> permits =
        PoolBuilder.from(Mono.just(PERMIT)).sizeBetween(0, PER_READER).buildPool();

    private Share() {}

    /** As {@link ReaderBuffers#take}, once this reader holds fewer than {@value #PER_READER}. */
    Mono<ByteBuf> take() {
      // next(): ask each pool once (see ReaderBuffers.take). A permit whose buffer never came is
      // given back here; one whose buffer came goes back with the buffer (a second release of
      // the same ref is a no-op in reactor-pool)
      return Flux.from(permits.acquire())
          .next()
          .flatMap(
              permit ->
                  Flux.from(pool.acquire())
                      .next()
                      .<ByteBuf>map(ref -> new Lent(ref, permit))
                      .doOnError(e -> permit.release().subscribe())
                      .doOnCancel(() -> permit.release().subscribe()));
    }

    /** Buffers this reader holds now. */
    int lent() {
      return permits.metrics().acquiredSize();
    }
  }

  /** Buffers lent now. */
  int lent() {
    return pool.metrics().acquiredSize();
  }

  /** The most buffers ever lent at once: the budget in buffers. */
  int max() {
    return max;
  }

  /** A pooled buffer as a Netty buffer that goes back to the pool when released. */
  private static final class Lent extends UnpooledDirectByteBuf {
    private final PooledRef<ByteBuffer> ref;
    private final PooledRef<Object> permit;

    /**
     * @param permit the reader's permit, given back with the buffer; null for none
     */
    Lent(PooledRef<ByteBuffer> ref, PooledRef<Object> permit) {
      // wraps (does not copy or free) the pooled buffer, whose whole capacity is writable
      super(UnpooledByteBufAllocator.DEFAULT, ref.poolable(), BUFFER_BYTES);
      this.ref = ref;
      this.permit = permit;
      clear();
    }

    @Override
    protected void deallocate() {
      super.deallocate();
      ref.release().subscribe();
      if (permit != null) {
        permit.release().subscribe();
      }
    }
  }
}
