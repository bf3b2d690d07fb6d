package io.registrycache.storage.s3;

import java.io.IOException;
import java.io.InterruptedIOException;
import java.io.UncheckedIOException;
import java.time.Duration;
import reactor.core.Exceptions;
import reactor.core.publisher.Mono;

/**
 * Waiting for one object-store operation from a blocking caller, with the store's errors as I/O
 * errors.
 */
final class S3Calls {

  private S3Calls() {}

  /**
   * The operation's value, waiting at most {@code timeout}.
   *
   * @throws InterruptedIOException when the waiting thread is interrupted (its flag set again)
   * @throws IOException when the operation fails or times out: "object store: " and the cause
   */
  static <T> T await(Mono<T> operation, Duration timeout) throws IOException {
    try {
      return operation.block(timeout);
    } catch (RuntimeException e) {
      Throwable cause = Exceptions.unwrap(e);
      if (cause instanceof InterruptedException) {
        Thread.currentThread().interrupt();
        throw new InterruptedIOException("interrupted waiting for the object store");
      }
      throw new IOException("object store: " + cause, cause);
    }
  }

  /** {@link #await}, its {@link IOException} as an {@link UncheckedIOException}. */
  static <T> T unchecked(Mono<T> operation, Duration timeout) {
    try {
      return await(operation, timeout);
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
  }
}
