package io.registrycache.upstream;

import org.springframework.core.io.buffer.DataBuffer;
import org.springframework.core.io.buffer.DataBufferUtils;

/** Reading a joined body ({@link DataBufferUtils#join}) into an array. */
public final class DataBuffers {

  private DataBuffers() {}

  /** The buffer's readable bytes, copied; the buffer is released, also when reading fails. */
  public static byte[] bytes(DataBuffer buffer) {
    try {
      byte[] bytes = new byte[buffer.readableByteCount()];
      buffer.read(bytes);
      return bytes;
    } finally {
      DataBufferUtils.release(buffer);
    }
  }
}
