package io.registrycache.proxy;

import static io.registrycache.testsupport.CacheClient.describe;
import static org.assertj.core.api.Assertions.assertThat;

import io.registrycache.RegistryCacheApplication;
import io.registrycache.testsupport.CacheClient;
import io.registrycache.testsupport.CacheProperties;
import io.registrycache.testsupport.ScriptedHttp;
import io.registrycache.testsupport.Sha256;
import io.registrycache.testsupport.TestFiles;
import java.io.IOException;
import java.io.InputStream;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.Socket;
import java.net.SocketException;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.time.Duration;
import java.util.Random;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;
import org.springframework.boot.test.context.SpringBootTest;
import org.springframework.boot.test.system.CapturedOutput;
import org.springframework.boot.test.system.OutputCaptureExtension;
import org.springframework.boot.test.web.server.LocalServerPort;
import org.springframework.test.context.DynamicPropertyRegistry;
import org.springframework.test.context.DynamicPropertySource;

/**
 * A client that stops reading a blob still arriving from the upstream holds its response's buffers
 * from the budget every such response shares ({@code fill-response-memory}), here exactly one
 * reader's share. Its connection is closed once a write to it has waited {@code send-timeout}, its
 * buffers go back, and a second client of another cold blob, which waited for them, gets its whole
 * verified blob. Nothing is lost: the first blob's fill goes on without its reader and is served
 * whole afterwards.
 */
@SpringBootTest(
    classes = RegistryCacheApplication.class,
    webEnvironment = SpringBootTest.WebEnvironment.RANDOM_PORT)
@ExtendWith(OutputCaptureExtension.class)
class StalledClientTest {

  static final ScriptedHttp upstream = new ScriptedHttp();
  static final Path storage = TestFiles.tempDirectory("registry-cache-stalled-");
  static final int SIZE = 24 * 1024 * 1024;

  @LocalServerPort int port;

  @DynamicPropertySource
  static void properties(DynamicPropertyRegistry registry) {
    CacheProperties.cache(storage)
        .localUpstream(upstream::baseUrl)
        .set(
            "registry-cache.blobs.fill-response-memory",
            String.valueOf(ReaderBuffers.PER_READER * ReaderBuffers.BUFFER_BYTES))
        .set("registry-cache.blobs.send-timeout", "2s")
        .set("registry-cache.blobs.prefetch.enabled", "false")
        .addTo(registry);
  }

  @AfterAll
  static void stop() {
    upstream.close();
  }

  private static byte[] blob(long seed) {
    byte[] b = new byte[SIZE];
    new Random(seed).nextBytes(b);
    return b;
  }

  private static void serve(String repository, byte[] content, String digest) {
    upstream.route(
        "/v2/" + repository + "/blobs/" + digest,
        ex -> ScriptedHttp.send(ex, 200, "application/octet-stream", content, digest));
  }

  @Test
  void aClientThatStopsReadingIsCutAfterTheSendTimeoutAndTheOthersGetTheirBlobs(
      CapturedOutput output) throws Exception {
    byte[] stalledBlob = blob(1);
    byte[] otherBlob = blob(2);
    String stalledDigest = Sha256.digest(stalledBlob);
    String otherDigest = Sha256.digest(otherBlob);
    serve("stalled", stalledBlob, stalledDigest);
    serve("other", otherBlob, otherDigest);

    long readBeforeCut;
    try (Socket stalled = new Socket()) {
      stalled.setReceiveBufferSize(4096); // little for the kernel to absorb
      stalled.connect(new InetSocketAddress(InetAddress.getLoopbackAddress(), port));
      stalled
          .getOutputStream()
          .write(
              ("GET /v2/stalled/blobs/" + stalledDigest + " HTTP/1.1\r\nHost: localhost\r\n\r\n")
                  .getBytes(StandardCharsets.US_ASCII));
      // reads nothing while the other client pulls: without the send timeout, the other client's
      // response waits for buffers for as long as this connection stays open
      CacheClient other = CacheClient.onPort(port).withTimeout(Duration.ofSeconds(60));
      HttpResponse<byte[]> response = other.get("/v2/other/blobs/" + otherDigest);
      assertThat(response.statusCode()).as(describe(response)).isEqualTo(200);
      assertThat(Sha256.digest(response.body())).isEqualTo(otherDigest);

      readBeforeCut = drainUntilClosed(stalled);
    }
    assertThat(readBeforeCut)
        .as("bytes the stalled client got before the cache closed its connection")
        .isLessThan(SIZE);
    assertThat(output.getOut())
        .contains("a write to it waited 2 s, the client stopped reading")
        .doesNotContain("WriteTimeoutException");

    // the fill went on without its reader: the blob is stored whole and served verified
    HttpResponse<byte[]> again = CacheClient.onPort(port).get("/v2/stalled/blobs/" + stalledDigest);
    assertThat(again.statusCode()).as(describe(again)).isEqualTo(200);
    assertThat(Sha256.digest(again.body())).isEqualTo(stalledDigest);
    assertThat(upstream.count("GET", "/v2/stalled/blobs/" + stalledDigest)).isEqualTo(1);
  }

  /** Reads what the connection still has until the peer closes it; returns the bytes read. */
  private static long drainUntilClosed(Socket socket) throws IOException {
    socket.setSoTimeout(30_000);
    InputStream in = socket.getInputStream();
    byte[] buffer = new byte[64 * 1024];
    long total = 0;
    try {
      for (int n; (n = in.read(buffer)) >= 0; ) {
        total += n;
      }
    } catch (SocketException reset) {
      // closed with unread bytes on the cache's side: a reset
    }
    return total;
  }
}
