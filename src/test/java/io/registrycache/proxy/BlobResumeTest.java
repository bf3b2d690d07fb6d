package io.registrycache.proxy;

import static io.registrycache.testsupport.CacheClient.describe;
import static org.assertj.core.api.Assertions.assertThat;

import com.sun.net.httpserver.HttpExchange;
import io.micrometer.core.instrument.MeterRegistry;
import io.registrycache.RegistryCacheApplication;
import io.registrycache.testsupport.CacheClient;
import io.registrycache.testsupport.CacheProperties;
import io.registrycache.testsupport.ScriptedHttp;
import io.registrycache.testsupport.Sha256;
import io.registrycache.testsupport.TestFiles;
import java.io.IOException;
import java.io.OutputStream;
import java.io.UncheckedIOException;
import java.net.http.HttpResponse;
import java.nio.file.Path;
import java.util.List;
import java.util.Random;
import java.util.concurrent.CopyOnWriteArrayList;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.springframework.beans.factory.annotation.Autowired;
import org.springframework.boot.test.context.SpringBootTest;
import org.springframework.boot.test.web.server.LocalServerPort;
import org.springframework.test.context.DynamicPropertyRegistry;
import org.springframework.test.context.DynamicPropertySource;

/**
 * A blob whose upstream transfer breaks off is resumed from the next byte (issue 29): the client
 * gets the whole, verified blob without a break, over real HTTP. The upstream is scripted ({@link
 * ScriptedHttp}): it cuts the body at 30 % and at 60 % and answers {@code Range} with {@code 206},
 * or it ignores {@code Range} and sends the whole blob again ({@code 200}).
 */
@SpringBootTest(
    classes = RegistryCacheApplication.class,
    webEnvironment = SpringBootTest.WebEnvironment.RANDOM_PORT)
class BlobResumeTest {

  static final ScriptedHttp upstream = new ScriptedHttp();
  static final Path storage = TestFiles.tempDirectory("registry-cache-resume-");
  static final int SIZE = 3 * 1024 * 1024 + 77;

  @LocalServerPort int port;
  @Autowired MeterRegistry meters;
  CacheClient cache;

  @DynamicPropertySource
  static void properties(DynamicPropertyRegistry registry) {
    CacheProperties.cache(storage)
        .localUpstream(upstream::baseUrl)
        .upstream("retry.max-attempts", "1")
        .upstream("circuit-breaker.enabled", "false")
        .addTo(registry);
  }

  @AfterAll
  static void stop() {
    upstream.close();
  }

  @BeforeEach
  void client() {
    cache = CacheClient.onPort(port);
  }

  private static byte[] blob(long seed) {
    byte[] b = new byte[SIZE];
    new Random(seed).nextBytes(b);
    return b;
  }

  /**
   * Sends {@code body[from, to)} after headers announcing {@code [from, end)}, then drops the
   * connection when cut short.
   */
  private static void send(
      HttpExchange ex, byte[] body, int from, int to, boolean ranged, String digest)
      throws IOException {
    ex.getResponseHeaders().set("Content-Type", "application/octet-stream");
    ex.getResponseHeaders().set("Docker-Content-Digest", digest);
    if (ranged) {
      ex.getResponseHeaders()
          .set("Content-Range", "bytes " + from + "-" + (body.length - 1) + "/" + body.length);
    }
    ex.sendResponseHeaders(ranged ? 206 : 200, body.length - from);
    OutputStream out = ex.getResponseBody();
    out.write(body, from, to - from);
    out.flush();
    ex.close(); // short of the announced length: the JDK server drops the connection
  }

  private static int rangeStart(HttpExchange ex) {
    String range = ex.getRequestHeaders().getFirst("Range");
    return range == null
        ? 0
        : Integer.parseInt(range.substring("bytes=".length(), range.indexOf('-')));
  }

  private double resumes(String outcome) {
    var counter = meters.find("registry.cache.upstream.resumes").tag("outcome", outcome).counter();
    return counter == null ? 0 : counter.count();
  }

  @Test
  void aTransferCutAt30And60PercentIsResumedWithRangesAndServedWhole() {
    byte[] content = blob(1);
    String digest = Sha256.digest(content);
    int cut1 = SIZE * 3 / 10;
    int cut2 = SIZE * 6 / 10;
    List<String> ranges = new CopyOnWriteArrayList<>();
    upstream.route(
        "/v2/cut/blobs/" + digest,
        ex -> {
          if ("HEAD".equals(ex.getRequestMethod())) {
            ScriptedHttp.send(ex, 200, "application/octet-stream", content, digest);
            return;
          }
          int from = rangeStart(ex);
          ranges.add(String.valueOf(ex.getRequestHeaders().getFirst("Range")));
          send(ex, content, from, from < cut1 ? cut1 : from < cut2 ? cut2 : SIZE, from > 0, digest);
        });
    double before = resumes("ranged");

    HttpResponse<byte[]> response = cache.get("/v2/cut/blobs/" + digest);

    assertThat(response.statusCode()).as(describe(response)).isEqualTo(200);
    assertThat(Sha256.digest(response.body())).isEqualTo(digest);
    assertThat(ranges).containsExactly("null", "bytes=" + cut1 + "-", "bytes=" + cut2 + "-");
    assertThat(resumes("ranged") - before).isEqualTo(2);
    // Stored whole: the next pull is a hit, no upstream request.
    assertThat(Sha256.digest(cache.get("/v2/cut/blobs/" + digest).body())).isEqualTo(digest);
    assertThat(upstream.count("GET", "/v2/cut/blobs/" + digest)).isEqualTo(3);
  }

  @Test
  void anUpstreamThatIgnoresRangeSendsTheWholeBlobAgainAndTheBytesAlreadyHereAreSkipped() {
    byte[] content = blob(2);
    String digest = Sha256.digest(content);
    int cut = SIZE * 3 / 10;
    upstream.route(
        "/v2/norange/blobs/" + digest,
        ex -> {
          if ("HEAD".equals(ex.getRequestMethod())) {
            ScriptedHttp.send(ex, 200, "application/octet-stream", content, digest);
            return;
          }
          boolean first = upstream.count("GET", "/v2/norange/blobs/" + digest) == 1;
          send(ex, content, 0, first ? cut : SIZE, false, digest);
        });
    double before = resumes("restarted");

    HttpResponse<byte[]> response = cache.get("/v2/norange/blobs/" + digest);

    assertThat(response.statusCode()).as(describe(response)).isEqualTo(200);
    assertThat(Sha256.digest(response.body())).isEqualTo(digest);
    assertThat(resumes("restarted") - before).isEqualTo(1);
    assertThat(upstream.count("GET", "/v2/norange/blobs/" + digest)).isEqualTo(2);
  }

  @Test
  void aResumedTransferWhoseBytesAreWrongIsNeitherServedCleanNorKept() {
    byte[] content = blob(3);
    String digest = Sha256.digest(content);
    byte[] other = blob(4); // what a lying upstream sends for the rest
    int cut = SIZE / 2;
    upstream.route(
        "/v2/lies/blobs/" + digest,
        ex -> {
          if ("HEAD".equals(ex.getRequestMethod())) {
            ScriptedHttp.send(ex, 200, "application/octet-stream", content, digest);
            return;
          }
          int from = rangeStart(ex);
          send(ex, from == 0 ? content : other, from, from == 0 ? cut : SIZE, from > 0, digest);
        });

    // The headers went out before the end: the client sees its transfer aborted, never a clean end.
    boolean cleanEnd;
    try {
      HttpResponse<byte[]> response = cache.get("/v2/lies/blobs/" + digest);
      cleanEnd = response.statusCode() == 200 && response.body().length == SIZE;
    } catch (UncheckedIOException aborted) {
      cleanEnd = false; // all but the last byte, then the connection closed
    }
    assertThat(cleanEnd).isFalse();
    long gets = upstream.count("GET", "/v2/lies/blobs/" + digest);
    try {
      cache.get("/v2/lies/blobs/" + digest); // fetched again, and aborted again
    } catch (UncheckedIOException aborted) {
      // expected
    }
    assertThat(upstream.count("GET", "/v2/lies/blobs/" + digest))
        .isGreaterThan(gets); // nothing was kept
  }
}
