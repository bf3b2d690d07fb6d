package io.registrycache.oci;

import static org.assertj.core.api.Assertions.assertThat;

import java.nio.ByteBuffer;
import java.security.MessageDigest;
import java.util.HexFormat;
import java.util.Random;
import org.junit.jupiter.api.Test;

/** Blobs are hashed by the native provider where it loads, with the JDK's answers. */
class DigestProviderTest {

  @Test
  void theNativeProviderLoadsOnLinuxX8664() {
    boolean linuxX64 = System.getProperty("os.name").toLowerCase().contains("linux")
        && System.getProperty("os.arch").matches("amd64|x86_64");
    assertThat(Digest.NATIVE != null).as("native SHA-2 provider loaded").isEqualTo(linuxX64);
  }

  @Test
  void directAndHeapBuffersHashAsTheJdkDoes() throws Exception {
    byte[] bytes = new byte[3 * 1024 * 1024 + 17];
    new Random(7).nextBytes(bytes);
    String expected = "sha256:" + HexFormat.of().formatHex(MessageDigest.getInstance("SHA-256", "SUN").digest(bytes));
    Digest digest = Digest.parse(expected);

    MessageDigest direct = digest.newMessageDigest();
    ByteBuffer buffer = ByteBuffer.allocateDirect(bytes.length);
    buffer.put(bytes).flip();
    while (buffer.hasRemaining()) {
      ByteBuffer slice = buffer.slice();
      slice.limit(Math.min(slice.remaining(), 65_521));
      direct.update(slice);
      buffer.position(buffer.position() + 65_521 > buffer.limit() ? buffer.limit() : buffer.position() + 65_521);
    }
    assertThat(digest.matches(direct)).isTrue();

    MessageDigest heap = digest.newMessageDigest();
    heap.update(bytes, 0, 5);
    heap.update(ByteBuffer.wrap(bytes, 5, bytes.length - 5));
    assertThat(digest.matches(heap)).isTrue();
    assertThat(Digest.parse(expected).recompute(bytes)).isEqualTo(digest);

    bytes[0] ^= 1;
    assertThat(digest.recompute(bytes)).isNotEqualTo(digest);
  }
}
