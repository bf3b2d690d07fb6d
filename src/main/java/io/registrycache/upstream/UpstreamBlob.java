package io.registrycache.upstream;

import org.springframework.core.io.buffer.DataBuffer;
import reactor.core.publisher.Flux;

/**
 * A blob response whose body is still arriving. The body must be subscribed to exactly once, and
 * every {@link DataBuffer} it emits released by the subscriber.
 *
 * @param size {@code Content-Length} in bytes, or -1 when the upstream did not say
 * @param body the bytes as they arrive; errors when the transfer fails or times out
 */
public record UpstreamBlob(long size, Flux<DataBuffer> body) {}
