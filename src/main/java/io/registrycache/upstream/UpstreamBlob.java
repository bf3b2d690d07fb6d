package io.registrycache.upstream;

import java.util.concurrent.atomic.AtomicLong;
import org.springframework.core.io.buffer.DataBuffer;
import org.springframework.core.io.buffer.DataBufferUtils;
import reactor.core.publisher.Flux;

/**
 * A blob response whose body is still arriving. The body must be subscribed to exactly once, and
 * every {@link DataBuffer} it emits released by the subscriber.
 *
 * @param size the whole blob's size in bytes ({@code Content-Length}, or the total of a {@code
 *     Content-Range}), or -1 when the upstream did not say
 * @param body the bytes as they arrive, from the offset asked for; errors when the transfer fails
 *     or times out
 */
public record UpstreamBlob(long size, Flux<DataBuffer> body) {

  /** {@code body} without its first {@code bytes} bytes; the buffers dropped are released. */
  public static Flux<DataBuffer> skip(Flux<DataBuffer> body, long bytes) {
    if (bytes <= 0) {
      return body;
    }
    AtomicLong left = new AtomicLong(bytes);
    return body.<DataBuffer>handle(
            (buffer, sink) -> {
              long l = left.get();
              int n = buffer.readableByteCount();
              if (l == 0) {
                sink.next(buffer);
              } else if (n <= l) {
                left.addAndGet(-n);
                DataBufferUtils.release(buffer);
              } else {
                buffer.readPosition(buffer.readPosition() + (int) l);
                left.set(0);
                sink.next(buffer);
              }
            })
        .doOnDiscard(DataBuffer.class, DataBufferUtils::release);
  }
}
