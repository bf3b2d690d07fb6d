package io.registrycache.upstream;

import static io.registrycache.testsupport.ScriptedHttp.base;
import static io.registrycache.testsupport.ScriptedHttp.respond;
import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import com.sun.net.httpserver.HttpExchange;
import com.sun.net.httpserver.HttpServer;
import io.github.resilience4j.circuitbreaker.CircuitBreaker;
import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import io.registrycache.config.RegistryCacheProperties;
import io.registrycache.config.UpstreamProperties;
import io.registrycache.oci.Digest;
import io.registrycache.oci.MediaTypes;
import io.registrycache.oci.OciErrorCode;
import io.registrycache.oci.Reference;
import io.registrycache.oci.RepositoryName;
import io.registrycache.testsupport.DataBuffers;
import io.registrycache.testsupport.ScriptedHttp;
import io.registrycache.testsupport.TestCache;
import io.registrycache.testsupport.TestUpstreams;
import java.io.IOException;
import java.io.OutputStream;
import java.net.InetAddress;
import java.net.ServerSocket;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicReference;
import java.util.function.Consumer;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.springframework.boot.health.contributor.Health;
import org.springframework.http.HttpStatus;

/**
 * Retries and the circuit breaker against scripted upstreams on loopback; every request the
 * upstream gets is counted on the server side.
 */
class UpstreamResilienceTest {

  private static final Duration WAIT = Duration.ofSeconds(20);
  private static final RepositoryName NAME = RepositoryName.parse("team/app");
  private static final Reference TAG = Reference.parse("v1");
  private static final byte[] MANIFEST =
      ("{\"schemaVersion\":2,\"mediaType\":\"" + MediaTypes.OCI_MANIFEST + "\"}")
          .getBytes(StandardCharsets.UTF_8);
  private static final Digest DIGEST = Digest.sha256(MANIFEST);

  private final List<AutoCloseable> closeables = new ArrayList<>();
  private SimpleMeterRegistry meters;

  /** The breakers' clock: the wait in open passes only when a test moves it. */
  private final TestCache.MutableClock clock = new TestCache.MutableClock();

  private UpstreamResilience resilience;
  private ReactorNettyUpstreamClient client;

  @BeforeEach
  void setUp() {
    meters = new SimpleMeterRegistry();
    resilience = new UpstreamResilience(null, meters, clock);
    client = new ReactorNettyUpstreamClient(null, meters, resilience);
  }

  @AfterEach
  void tearDown() throws Exception {
    client.destroy();
    for (AutoCloseable c : closeables) {
      c.close();
    }
  }

  /** A registry whose answer to {@code /v2/...} is scripted per request number (1-based). */
  final class Scripted {
    final AtomicInteger requests = new AtomicInteger();
    final AtomicReference<Script> script = new AtomicReference<>();
    final HttpServer server = server();

    interface Script {
      void answer(HttpExchange ex, int n) throws IOException;
    }

    Scripted(Script initial) {
      script.set(initial);
      server.createContext("/v2/", ex -> script.get().answer(ex, requests.incrementAndGet()));
    }

    Upstream upstream(String key, Consumer<Map<String, Object>> customize) {
      return TestUpstreams.upstream(
          key,
          base(server),
          s -> {
            s.put("read-timeout", Duration.ofSeconds(5));
            customize.accept(s);
          });
    }
  }

  // --- retries --------------------------------------------------------------------------------

  @Test
  void serviceUnavailableTwiceThenAnAnswerSucceedsAfterTwoRetries() {
    Scripted fake =
        new Scripted(
            (ex, n) -> {
              if (n <= 2) {
                respond(
                    ex,
                    503,
                    Map.of(),
                    "{\"errors\":[{\"code\":\"UNAVAILABLE\"}]}".getBytes(StandardCharsets.UTF_8));
              } else {
                manifest(ex);
              }
            });
    Upstream upstream = fake.upstream("flaky", s -> {});

    long start = System.nanoTime();
    UpstreamManifest manifest =
        client.getManifest(upstream, NAME, TAG, MediaTypes.ALL_MANIFESTS, 1 << 20).block(WAIT);
    Duration took = Duration.ofNanos(System.nanoTime() - start);

    assertThat(manifest.body()).isEqualTo(MANIFEST);
    assertThat(fake.requests).as("requests the upstream got").hasValue(3);
    assertThat(retries("flaky")).isEqualTo(2);
    // backoff 200 ms ± 50 %, then 400 ms ± 50 %
    assertThat(took)
        .isGreaterThanOrEqualTo(Duration.ofMillis(290))
        .isLessThan(Duration.ofSeconds(5));
    assertThat(
            meters
                .get(UpstreamMetrics.REQUEST_TIMER)
                .tags("upstream", "flaky", "kind", "manifest", "outcome", "server_error")
                .timer()
                .count())
        .as("each attempt is timed")
        .isEqualTo(2);
    assertThat(
            meters
                .get(UpstreamMetrics.REQUEST_TIMER)
                .tags("upstream", "flaky", "kind", "manifest", "outcome", "success")
                .timer()
                .count())
        .isEqualTo(1);
  }

  @Test
  void everyIdempotentRequestIsRetriedBeforeItsHeaders() {
    // 502 and 504 from the upstream, then the answer, for each kind of request
    Scripted fake =
        new Scripted(
            (ex, n) -> {
              if (n % 3 == 1) {
                respond(ex, 502, Map.of(), new byte[0]);
              } else if (n % 3 == 2) {
                respond(ex, 504, Map.of(), new byte[0]);
              } else if (ex.getRequestURI().getPath().contains("/tags/")) {
                respond(
                    ex,
                    200,
                    Map.of("Content-Type", "application/json"),
                    "{\"name\":\"team/app\",\"tags\":[\"v1\"]}".getBytes(StandardCharsets.UTF_8));
              } else {
                manifest(ex);
              }
            });
    Upstream upstream =
        fake.upstream(
            "kinds",
            s -> {
              s.put("retry.initial-backoff", Duration.ofMillis(10));
              s.put("circuit-breaker.enabled", false); // 2 of 3 attempts fail: a breaker would open
            });

    assertThat(
            client.headManifest(upstream, NAME, TAG, MediaTypes.ALL_MANIFESTS).block(WAIT).digest())
        .isEqualTo(DIGEST);
    assertThat(fake.requests).hasValue(3);
    assertThat(client.headBlob(upstream, NAME, DIGEST).block(WAIT)).isEqualTo(MANIFEST.length);
    assertThat(fake.requests).hasValue(6);
    assertThat(
            new String(
                client.listTags(upstream, NAME, null, null).block(WAIT).body(),
                StandardCharsets.UTF_8))
        .contains("v1");
    assertThat(fake.requests).hasValue(9);
    UpstreamBlob blob = client.getBlob(upstream, NAME, DIGEST).block(WAIT);
    assertThat(DataBuffers.join(blob.body(), WAIT)).isEqualTo(MANIFEST);
    assertThat(fake.requests).hasValue(12);
    assertThat(retries("kinds")).isEqualTo(8);
  }

  @Test
  void notFoundIsNotRetriedAndCountsAsSuccessForTheBreaker() {
    Scripted fake = new Scripted((ex, n) -> respond(ex, 404, Map.of(), new byte[0]));
    Upstream upstream = fake.upstream("missing", s -> smallWindow(s, Duration.ofSeconds(30)));

    for (int i = 0; i < 6; i++) {
      assertThatThrownBy(
              () ->
                  client
                      .getManifest(upstream, NAME, TAG, MediaTypes.ALL_MANIFESTS, 1 << 20)
                      .block(WAIT))
          .isInstanceOfSatisfying(
              UpstreamException.class, e -> assertThat(e.isNotFound()).isTrue());
    }
    assertThat(fake.requests).as("one request per call").hasValue(6);
    assertThat(retries("missing")).isZero();
    assertThat(resilience.state(upstream)).isEqualTo(CircuitBreaker.State.CLOSED);
  }

  @Test
  void tooManyRequestsIsPassedOnAtOnceWithRetryAfterAndIgnoredByTheBreaker() {
    Scripted fake =
        new Scripted((ex, n) -> respond(ex, 429, Map.of("Retry-After", "7"), new byte[0]));
    Upstream upstream = fake.upstream("limited", s -> smallWindow(s, Duration.ofSeconds(30)));

    for (int i = 0; i < 6; i++) {
      assertThatThrownBy(
              () ->
                  client
                      .getManifest(upstream, NAME, TAG, MediaTypes.ALL_MANIFESTS, 1 << 20)
                      .block(WAIT))
          .isInstanceOfSatisfying(
              UpstreamException.class,
              e -> {
                assertThat(e.code()).isEqualTo(OciErrorCode.TOOMANYREQUESTS);
                assertThat(e.retryAfter()).contains(Duration.ofSeconds(7));
                assertThat(e.isUnavailable()).isTrue();
              });
    }
    assertThat(fake.requests).hasValue(6);
    assertThat(retries("limited")).isZero();
    assertThat(resilience.state(upstream))
        .as("429 does not open the breaker")
        .isEqualTo(CircuitBreaker.State.CLOSED);
  }

  @Test
  void serviceUnavailableAskingForALongerWaitThanMaxBackoffIsNotRetried() {
    Scripted fake =
        new Scripted((ex, n) -> respond(ex, 503, Map.of("Retry-After", "30"), new byte[0]));
    Upstream upstream = fake.upstream("busy", s -> {});

    assertThatThrownBy(
            () -> client.headManifest(upstream, NAME, TAG, MediaTypes.ALL_MANIFESTS).block(WAIT))
        .isInstanceOfSatisfying(
            UpstreamException.class,
            e -> {
              assertThat(e.status()).isEqualTo(HttpStatus.SERVICE_UNAVAILABLE);
              assertThat(e.retryAfter()).contains(Duration.ofSeconds(30));
            });
    assertThat(fake.requests).hasValue(1);
  }

  @Test
  void blobBodyBreakingOffIsNotRetried() {
    Scripted fake =
        new Scripted(
            (ex, n) -> {
              ex.getResponseHeaders().add("Content-Type", "application/octet-stream");
              ex.sendResponseHeaders(200, 1000);
              OutputStream out = ex.getResponseBody();
              out.write(new byte[10]);
              out.flush();
              ex.getHttpContext().getServer(); // keep the exchange referenced
              ex.close(); // 990 bytes short
            });
    Upstream upstream = fake.upstream("cut", s -> {});

    UpstreamBlob blob = client.getBlob(upstream, NAME, DIGEST).block(WAIT);
    assertThat(blob.size()).isEqualTo(1000);
    assertThatThrownBy(() -> DataBuffers.join(blob.body(), WAIT))
        .isInstanceOf(UpstreamException.class);
    assertThat(fake.requests).as("the blob download owns mid-body failures").hasValue(1);
    assertThat(retries("cut")).isZero();
  }

  // --- the circuit breaker --------------------------------------------------------------------

  @Test
  void breakerOpensFailsFastWithoutRequestsThenHalfOpensAndCloses() throws Exception {
    AtomicReference<Boolean> down = new AtomicReference<>(true);
    Scripted fake =
        new Scripted(
            (ex, n) -> {
              if (down.get()) {
                ex.close(); // connection closed without an answer: a crashing upstream
              } else {
                manifest(ex);
              }
            });
    Upstream upstream = fake.upstream("down", s -> smallWindow(s, Duration.ofSeconds(1)));
    UpstreamsHealthIndicator health = new UpstreamsHealthIndicator(resilience);

    // 1st call: 3 attempts fail; 2nd call: its 1st attempt fills the window (4 of 4 failed) and
    // opens the breaker, its retry is refused.
    for (int i = 0; i < 2; i++) {
      assertThatThrownBy(
              () ->
                  client
                      .getManifest(upstream, NAME, TAG, MediaTypes.ALL_MANIFESTS, 1 << 20)
                      .block(WAIT))
          .isInstanceOf(UpstreamException.class);
    }
    assertThat(resilience.state(upstream)).isEqualTo(CircuitBreaker.State.OPEN);
    assertThat(fake.requests).hasValue(4);

    long start = System.nanoTime();
    for (int i = 0; i < 20; i++) {
      assertThatThrownBy(
              () ->
                  client
                      .getManifest(upstream, NAME, TAG, MediaTypes.ALL_MANIFESTS, 1 << 20)
                      .block(WAIT))
          .isInstanceOfSatisfying(
              UpstreamException.class,
              e -> {
                assertThat(e.code()).isEqualTo(OciErrorCode.UPSTREAM_UNAVAILABLE);
                assertThat(e.status()).isEqualTo(HttpStatus.SERVICE_UNAVAILABLE);
                assertThat(e.isUnavailable()).isTrue();
                assertThat(e.getMessage())
                    .contains("upstream 'down'")
                    .contains("circuit open")
                    .contains("closed the connection early");
                assertThat(e.retryAfter())
                    .hasValueSatisfying(
                        d -> assertThat(d).isLessThanOrEqualTo(Duration.ofSeconds(1)));
              });
    }
    System.out.printf(
        "20 calls while open: %d ms%n", Duration.ofNanos(System.nanoTime() - start).toMillis());
    assertThat(fake.requests).as("no request reaches the upstream while open").hasValue(4);
    assertThat(meters.get(UpstreamResilience.REJECTED).tag("upstream", "down").counter().count())
        .isEqualTo(21);
    assertThat(gauge("down", "open")).isEqualTo(1);
    assertThat(gauge("down", "closed")).isZero();

    Health open = health.health();
    assertThat(open.getStatus()).isEqualTo(UpstreamsHealthIndicator.DEGRADED);
    @SuppressWarnings("unchecked")
    Map<String, Object> details = (Map<String, Object>) open.getDetails().get("down");
    assertThat(details)
        .containsEntry("circuit", "OPEN")
        .containsKey("trialRequestsFrom")
        .containsKey("lastFailureAt");
    assertThat((String) details.get("lastFailure")).contains("closed the connection early");

    // the upstream heals; after wait-in-open two trial requests close the breaker
    down.set(false);
    clock.advance(Duration.ofMillis(1100));
    for (int i = 0; i < 2; i++) {
      assertThat(
              client
                  .getManifest(upstream, NAME, TAG, MediaTypes.ALL_MANIFESTS, 1 << 20)
                  .block(WAIT)
                  .body())
          .isEqualTo(MANIFEST);
    }
    assertThat(resilience.state(upstream)).isEqualTo(CircuitBreaker.State.CLOSED);
    assertThat(fake.requests).hasValue(6);
    assertThat(gauge("down", "closed")).isEqualTo(1);
    assertThat(health.health().getStatus().getCode()).isEqualTo("UP");
  }

  @Test
  void halfOpenTrialThatFailsReopensTheBreaker() throws Exception {
    Scripted fake = new Scripted((ex, n) -> respond(ex, 503, Map.of(), new byte[0]));
    Upstream upstream =
        fake.upstream(
            "still-down",
            s -> {
              smallWindow(s, Duration.ofMillis(300));
              s.put("retry.max-attempts", 1);
            });
    for (int i = 0; i < 4; i++) {
      assertThatThrownBy(() -> client.headBlob(upstream, NAME, DIGEST).block(WAIT))
          .isInstanceOf(UpstreamException.class);
    }
    assertThat(resilience.state(upstream)).isEqualTo(CircuitBreaker.State.OPEN);
    clock.advance(Duration.ofMillis(400));
    for (int i = 0; i < 2; i++) { // the two trial requests fail
      assertThatThrownBy(() -> client.headBlob(upstream, NAME, DIGEST).block(WAIT))
          .isInstanceOfSatisfying(
              UpstreamException.class,
              e -> assertThat(e.getMessage()).doesNotContain("circuit open"));
    }
    assertThat(resilience.state(upstream)).isEqualTo(CircuitBreaker.State.OPEN);
    assertThat(fake.requests).hasValue(6);
    assertThatThrownBy(() -> client.headBlob(upstream, NAME, DIGEST).block(WAIT))
        .isInstanceOfSatisfying(
            UpstreamException.class, e -> assertThat(e.getMessage()).contains("circuit open"));
    assertThat(fake.requests).hasValue(6);
  }

  @Test
  void failedTrialsLengthenTheWaitInOpen() throws Exception {
    Scripted fake = new Scripted((ex, n) -> respond(ex, 503, Map.of(), new byte[0]));
    Upstream upstream =
        fake.upstream(
            "backoff",
            s -> {
              smallWindow(s, Duration.ofMillis(300));
              s.put("circuit-breaker.wait-in-open-multiplier", 5);
              s.put("circuit-breaker.permitted-calls-in-half-open", 1);
              s.put("retry.max-attempts", 1);
            });
    for (int i = 0; i < 4; i++) {
      assertThatThrownBy(() -> client.headBlob(upstream, NAME, DIGEST).block(WAIT))
          .isInstanceOf(UpstreamException.class);
    }
    assertThat(resilience.state(upstream)).isEqualTo(CircuitBreaker.State.OPEN);
    clock.advance(Duration.ofMillis(400)); // past the first wait (300 ms): one trial, which fails
    assertThatThrownBy(() -> client.headBlob(upstream, NAME, DIGEST).block(WAIT))
        .isInstanceOfSatisfying(
            UpstreamException.class,
            e -> assertThat(e.getMessage()).doesNotContain("circuit open"));
    assertThat(fake.requests).hasValue(5);
    UpstreamResilience.UpstreamState reopened =
        resilience.states().stream()
            .filter(st -> st.upstream().equals("backoff"))
            .findFirst()
            .orElseThrow();
    assertThat(Duration.between(reopened.since(), reopened.retryAt()))
        .as("second wait: 5 x 300 ms")
        .isEqualTo(Duration.ofMillis(1500));

    clock.advance(Duration.ofMillis(400)); // the first wait would be over, the second is not
    assertThatThrownBy(() -> client.headBlob(upstream, NAME, DIGEST).block(WAIT))
        .isInstanceOfSatisfying(
            UpstreamException.class,
            e -> {
              assertThat(e.getMessage()).contains("circuit open");
              assertThat(e.retryAfter())
                  .hasValueSatisfying(d -> assertThat(d).isGreaterThan(Duration.ofMillis(500)));
            });
    assertThat(fake.requests).as("no trial before the longer wait is over").hasValue(5);
  }

  @Test
  void withDefaultSettingsRecoveryIsSeenWithinSeconds() throws Exception {
    AtomicReference<Boolean> down = new AtomicReference<>(true);
    Scripted fake =
        new Scripted(
            (ex, n) -> {
              if (down.get()) {
                ex.close(); // a crashing upstream
              } else {
                manifest(ex);
              }
            });
    UpstreamProperties.CircuitBreaker defaults =
        RegistryCacheProperties.upstream(Map.of()).circuitBreaker();
    assertThat(defaults.waitInOpen()).isLessThanOrEqualTo(Duration.ofSeconds(5));
    Upstream upstream = fake.upstream("recovering", s -> {});
    for (int i = 0; i < 20 && resilience.state(upstream) != CircuitBreaker.State.OPEN; i++) {
      assertThatThrownBy(
              () ->
                  client
                      .getManifest(upstream, NAME, TAG, MediaTypes.ALL_MANIFESTS, 1 << 20)
                      .block(WAIT))
          .isInstanceOf(UpstreamException.class);
    }
    assertThat(resilience.state(upstream)).isEqualTo(CircuitBreaker.State.OPEN);

    down.set(false);
    // just before the default wait in open is over the breaker still refuses; once over, it lets
    // a trial through and pulls are served again
    clock.advance(defaults.waitInOpen().minusMillis(1));
    assertThatThrownBy(
            () ->
                client
                    .getManifest(upstream, NAME, TAG, MediaTypes.ALL_MANIFESTS, 1 << 20)
                    .block(WAIT))
        .isInstanceOfSatisfying(
            UpstreamException.class, e -> assertThat(e.getMessage()).contains("circuit open"));
    clock.advance(Duration.ofMillis(2));
    for (int i = 0; i < 3; i++) {
      assertThat(
              client
                  .getManifest(upstream, NAME, TAG, MediaTypes.ALL_MANIFESTS, 1 << 20)
                  .block(WAIT))
          .isNotNull();
    }
    assertThat(resilience.state(upstream)).isEqualTo(CircuitBreaker.State.CLOSED);
  }

  @Test
  void refusedConnectionsOpenTheBreakerAndThenCallsFailInMilliseconds() throws Exception {
    int port;
    try (ServerSocket s = new ServerSocket(0, 1, InetAddress.getLoopbackAddress())) {
      port = s.getLocalPort();
    }
    Upstream upstream =
        TestUpstreams.upstream(
            "refused", "http://127.0.0.1:" + port, s -> smallWindow(s, Duration.ofSeconds(30)));

    long before =
        time(() -> client.headManifest(upstream, NAME, TAG, MediaTypes.ALL_MANIFESTS).block(WAIT));
    time(() -> client.headManifest(upstream, NAME, TAG, MediaTypes.ALL_MANIFESTS).block(WAIT));
    assertThat(resilience.state(upstream)).isEqualTo(CircuitBreaker.State.OPEN);
    double rejected =
        meters.get(UpstreamResilience.REJECTED).tag("upstream", "refused").counter().count();
    long after =
        time(() -> client.headManifest(upstream, NAME, TAG, MediaTypes.ALL_MANIFESTS).block(WAIT));

    System.out.printf(
        "refused upstream: %d ms per call with retries, %d ms once the breaker is open%n",
        before, after);
    assertThat(before).as("3 attempts with backoff").isGreaterThanOrEqualTo(290);
    // once open, the call is refused by the breaker without an attempt (a timing bound would fail
    // on a busy machine)
    assertThat(meters.get(UpstreamResilience.REJECTED).tag("upstream", "refused").counter().count())
        .isEqualTo(rejected + 1);
  }

  @Test
  void disabledBreakerNeverOpens() {
    Scripted fake = new Scripted((ex, n) -> respond(ex, 500, Map.of(), new byte[0]));
    Upstream upstream =
        fake.upstream(
            "no-breaker",
            s -> {
              smallWindow(s, Duration.ofSeconds(30));
              s.put("circuit-breaker.enabled", false);
            });
    for (int i = 0; i < 8; i++) {
      assertThatThrownBy(() -> client.headBlob(upstream, NAME, DIGEST).block(WAIT))
          .isInstanceOfSatisfying(
              UpstreamException.class,
              e -> assertThat(e.getMessage()).doesNotContain("circuit open"));
    }
    assertThat(fake.requests).as("500 is not retried").hasValue(8);
    assertThat(resilience.state(upstream)).isEqualTo(CircuitBreaker.State.DISABLED);
    Health health = new UpstreamsHealthIndicator(resilience).health();
    assertThat(health.getStatus().getCode()).isEqualTo("UP");
    assertThat(health.getDetails().get("no-breaker").toString())
        .contains("DISABLED")
        .contains("500");
  }

  // --- helpers --------------------------------------------------------------------------------

  /** Window of 4 calls, all counted, 50 %; two trial requests. */
  private static void smallWindow(Map<String, Object> s, Duration waitInOpen) {
    s.put("circuit-breaker.sliding-window-size", 4);
    s.put("circuit-breaker.minimum-number-of-calls", 4);
    s.put("circuit-breaker.failure-rate-threshold", 50);
    s.put("circuit-breaker.wait-in-open", waitInOpen);
    s.put("circuit-breaker.permitted-calls-in-half-open", 2);
  }

  private static long time(Runnable call) {
    long start = System.nanoTime();
    try {
      call.run();
    } catch (UpstreamException expected) {
      // timing only
    }
    return Duration.ofNanos(System.nanoTime() - start).toMillis();
  }

  private double retries(String upstream) {
    return meters.get(UpstreamResilience.RETRIES).tag("upstream", upstream).counter().count();
  }

  private double gauge(String upstream, String state) {
    return meters
        .get(UpstreamResilience.CIRCUIT_STATE)
        .tags("upstream", upstream, "state", state)
        .gauge()
        .value();
  }

  private static void manifest(HttpExchange ex) throws IOException {
    respond(
        ex,
        200,
        Map.of("Content-Type", MediaTypes.OCI_MANIFEST, "Docker-Content-Digest", DIGEST.toString()),
        MANIFEST);
  }

  private HttpServer server() {
    return ScriptedHttp.server(closeables);
  }
}
