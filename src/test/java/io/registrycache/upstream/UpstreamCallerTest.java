package io.registrycache.upstream;

import static io.registrycache.testsupport.ScriptedHttp.base;
import static io.registrycache.testsupport.ScriptedHttp.respond;
import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import com.github.benmanes.caffeine.cache.Ticker;
import com.sun.net.httpserver.HttpServer;
import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import io.registrycache.oci.Digest;
import io.registrycache.oci.RepositoryName;
import io.registrycache.testsupport.ScriptedHttp;
import io.registrycache.testsupport.TestUpstreams;
import java.io.IOException;
import java.io.OutputStream;
import java.net.URI;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.springframework.http.HttpMethod;
import reactor.core.Disposable;
import reactor.core.publisher.Mono;
import reactor.core.publisher.Sinks;

/**
 * A reply whose body nobody reads must not keep its connection: with a pool of one connection
 * ({@code max-concurrent-requests: 1}) and a {@code read-timeout} longer than the test waits, a
 * second request only completes when the first reply's connection went back to the pool (or was
 * closed) as soon as its attempt ended.
 */
class UpstreamCallerTest {

  private static final Duration WAIT = Duration.ofSeconds(20);
  private static final RepositoryName NAME = RepositoryName.parse("team/app");

  /** Far more than the socket buffers hold: the big reply cannot arrive whole unread. */
  private static final int BIG = 32 * 1024 * 1024;

  private static final byte[] SMALL = "{\"small\":true}".getBytes(StandardCharsets.UTF_8);

  private final List<AutoCloseable> closeables = new ArrayList<>();
  private final AtomicInteger bigRequests = new AtomicInteger();
  private UpstreamCaller caller;
  private Upstream upstream;

  @BeforeEach
  void setUp() {
    HttpServer server = ScriptedHttp.server(closeables);
    server.createContext(
        "/v2/team/app/blobs/big",
        ex -> {
          bigRequests.incrementAndGet();
          ex.sendResponseHeaders(200, BIG);
          byte[] chunk = new byte[64 * 1024];
          try (OutputStream out = ex.getResponseBody()) {
            for (int sent = 0; sent < BIG; sent += chunk.length) {
              out.write(chunk);
            }
          } catch (IOException cutOff) {
            // the client dropped the connection: expected when it stops reading
          }
        });
    server.createContext(
        "/v2/team/app/blobs/small",
        ex -> respond(ex, 200, Map.of("Content-Type", "application/octet-stream"), SMALL));
    upstream =
        TestUpstreams.upstream(
            "one-connection",
            base(server),
            s -> {
              s.put("max-concurrent-requests", 1);
              // A leaked connection would come back only after this: longer than WAIT.
              s.put("read-timeout", Duration.ofSeconds(90));
            });
    SimpleMeterRegistry meters = new SimpleMeterRegistry();
    caller =
        new UpstreamCaller(
            meters,
            new UpstreamResilience(null, meters),
            "registry-cache-test",
            Ticker.systemTicker(),
            true);
  }

  @AfterEach
  void tearDown() throws Exception {
    caller.close();
    for (AutoCloseable c : closeables) {
      c.close();
    }
  }

  @Test
  void aReplyCancelledBeforeItsBodyIsReadFreesItsConnection() {
    Sinks.One<Integer> headersArrived = Sinks.one();
    Disposable first =
        caller
            .call(
                upstream,
                "blob",
                "big blob",
                get("big"),
                reply -> {
                  headersArrived.tryEmitValue(reply.status());
                  return Mono.never(); // the body is never subscribed
                })
            .subscribe();
    assertThat(headersArrived.asMono().block(WAIT)).isEqualTo(200);
    first.dispose();

    assertSmallArrivesWhole();
  }

  @Test
  void aReaderFailingBeforeItReadsTheBodyFreesItsConnection() {
    assertThatThrownBy(
            () ->
                caller
                    .call(
                        upstream,
                        "blob",
                        "big blob",
                        get("big"),
                        reply -> Mono.<byte[]>error(new IllegalStateException("reader gave up")))
                    .block(WAIT))
        .isInstanceOf(UpstreamException.class)
        .hasRootCauseMessage("reader gave up");
    assertThat(bigRequests).hasValue(1);

    assertSmallArrivesWhole();
  }

  @Test
  void aBodyReadToItsEndKeepsTheConnectionForTheNextRequest() {
    assertSmallArrivesWhole();
    assertSmallArrivesWhole();
  }

  /** The small body through the pool's one connection, byte for byte. */
  private void assertSmallArrivesWhole() {
    byte[] body =
        caller
            .call(
                upstream,
                "blob",
                "small blob",
                get("small"),
                reply -> UpstreamCaller.listBody(upstream, "small blob", reply))
            .block(WAIT);
    assertThat(Digest.sha256(body)).isEqualTo(Digest.sha256(SMALL));
  }

  private UpstreamCaller.Request get(String blob) {
    URI uri = URI.create(upstream.url() + "/v2/team/app/blobs/" + blob);
    return new UpstreamCaller.Request(HttpMethod.GET, uri, NAME, null, null);
  }
}
