package io.registrycache.testsupport;

import java.time.Duration;
import org.springframework.core.io.buffer.DataBuffer;
import org.springframework.core.io.buffer.DataBufferUtils;
import reactor.core.publisher.Flux;
import reactor.core.publisher.Mono;

/** Reading reactive bodies in tests. */
public final class DataBuffers {

  private DataBuffers() {}

  /**
   * Every byte of {@code body}, buffers released; an empty array for an empty body. Errors of the
   * body are thrown; waits at most {@code timeout}.
   */
  public static byte[] join(Flux<DataBuffer> body, Duration timeout) {
    return DataBufferUtils.join(body)
        .map(
            buffer -> {
              byte[] bytes = new byte[buffer.readableByteCount()];
              buffer.read(bytes);
              DataBufferUtils.release(buffer);
              return bytes;
            })
        .switchIfEmpty(Mono.just(new byte[0]))
        .block(timeout);
  }
}
