package io.registrycache.api;

import static org.assertj.core.api.Assertions.assertThat;

import io.registrycache.it.AbstractCacheIT;
import io.registrycache.testsupport.TestImages;
import io.registrycache.testsupport.TestImages.Image;
import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.Socket;
import java.nio.charset.StandardCharsets;
import org.junit.jupiter.api.Test;

/**
 * One keep-alive connection reused the way clients do: a request that arrives while the previous
 * one is still terminating on the server, answered from memory, must not stall the connection
 * (reactor-netty issue #4361, fixed in 1.3.8; no per-exchange scheduler hop since).
 */
class KeepAliveIT extends AbstractCacheIT {

  @Test
  void aConnectionKeepsServingAfterAQueuedRequestAnsweredFromMemory() throws IOException {
    Image image =
        upstream.pusher().push(TestImages.smallOci(TestImages.uniqueRepository("keepalive"), "v1"));
    String blob = "/v2/" + image.repository() + "/blobs/" + image.layers().get(0).digest();
    String manifest = "/v2/" + image.repository() + "/manifests/" + image.manifest().digest();
    assertThat(cache.get(blob).statusCode()).isEqualTo(200);
    assertThat(cache.get(manifest).statusCode())
        .isEqualTo(200); // now in memory: answered synchronously

    try (Socket socket = new Socket("127.0.0.1", port)) {
      socket.setSoTimeout(5000);
      OutputStream out = socket.getOutputStream();
      InputStream in = socket.getInputStream();
      // The second request is queued behind the first, then answered from memory.
      out.write((request(blob) + request(manifest)).getBytes(StandardCharsets.US_ASCII));
      out.flush();
      assertThat(readResponse(in)).startsWith("HTTP/1.1 200");
      assertThat(readResponse(in)).startsWith("HTTP/1.1 200");
      // The connection must still read: this third request hung before the workaround.
      out.write(request(manifest).getBytes(StandardCharsets.US_ASCII));
      out.flush();
      assertThat(readResponse(in)).startsWith("HTTP/1.1 200");
    }
  }

  private static String request(String path) {
    return "GET " + path + " HTTP/1.1\r\nHost: localhost\r\n\r\n";
  }

  /** Reads one response with a Content-Length body; returns its head. */
  private static String readResponse(InputStream in) throws IOException {
    ByteArrayOutputStream head = new ByteArrayOutputStream();
    int matched = 0;
    while (matched < 4) {
      int b = in.read();
      if (b < 0) {
        throw new IOException("connection closed after: " + head);
      }
      head.write(b);
      matched = (b == "\r\n\r\n".charAt(matched)) ? matched + 1 : (b == '\r' ? 1 : 0);
    }
    String text = head.toString(StandardCharsets.US_ASCII);
    long length = 0;
    for (String line : text.split("\r\n")) {
      if (line.toLowerCase().startsWith("content-length:")) {
        length = Long.parseLong(line.substring(line.indexOf(':') + 1).trim());
      }
    }
    in.readNBytes((int) length);
    return text;
  }
}
