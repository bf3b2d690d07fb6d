package io.registrycache.upstream;

import static io.registrycache.testsupport.ScriptedHttp.base;
import static io.registrycache.testsupport.ScriptedHttp.respond;
import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import com.sun.net.httpserver.HttpServer;
import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import io.registrycache.oci.Digest;
import io.registrycache.oci.MediaTypes;
import io.registrycache.oci.OciErrorCode;
import io.registrycache.oci.Reference;
import io.registrycache.oci.RepositoryName;
import io.registrycache.testsupport.DataBuffers;
import io.registrycache.testsupport.ScriptedHttp;
import io.registrycache.testsupport.TestUpstreams;
import java.io.IOException;
import java.io.OutputStream;
import java.net.InetAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Base64;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicReference;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.springframework.http.HttpStatus;
import org.springframework.util.unit.DataSize;
import reactor.core.publisher.Flux;

/**
 * Behaviour that registry:2 cannot show, against scripted upstreams on loopback: Bearer token
 * authentication through jib (single-flight, refresh on 401), redirects to a storage host, failures
 * (refused, hanging, rate limits, 5xx, bad digest) and tag paging.
 */
class LocalUpstreamTest {

  private static final Duration WAIT = Duration.ofSeconds(20);
  private static final RepositoryName NAME = RepositoryName.parse("team/app");
  private static final byte[] MANIFEST =
      ("{\"schemaVersion\":2,\"mediaType\":\"" + MediaTypes.OCI_MANIFEST + "\"}")
          .getBytes(StandardCharsets.UTF_8);
  private static final byte[] BLOB =
      "blob content from the storage host".getBytes(StandardCharsets.UTF_8);

  private final List<AutoCloseable> closeables = new ArrayList<>();
  private SimpleMeterRegistry meters;
  private ReactorNettyUpstreamClient client;

  @BeforeEach
  void setUp() {
    meters = new SimpleMeterRegistry();
    client = new ReactorNettyUpstreamClient(null, meters);
  }

  @AfterEach
  void tearDown() throws Exception {
    client.destroy();
    for (AutoCloseable c : closeables) {
      c.close();
    }
  }

  // --- Bearer token authentication, redirects ------------------------------------------------

  /** A registry that wants Bearer tokens from its own /token endpoint, and a storage host. */
  final class TokenRegistry {
    final HttpServer registry = server();
    final HttpServer storage = server();
    final AtomicInteger tokensIssued = new AtomicInteger();
    final AtomicReference<String> validToken = new AtomicReference<>();
    final List<String> tokenQueries = new CopyOnWriteArrayList<>();
    final List<String> storageAuthorizations = new CopyOnWriteArrayList<>();
    final Map<String, Integer> manifestStatuses = new ConcurrentHashMap<>();

    TokenRegistry(String user, String password) {
      String expectedBasic =
          "Basic "
              + Base64.getEncoder()
                  .encodeToString((user + ":" + password).getBytes(StandardCharsets.UTF_8));
      registry.createContext(
          "/token",
          ex -> {
            tokenQueries.add(ex.getRequestURI().getRawQuery());
            if (!expectedBasic.equals(ex.getRequestHeaders().getFirst("Authorization"))) {
              respond(
                  ex,
                  401,
                  Map.of(),
                  "{\"errors\":[{\"code\":\"UNAUTHORIZED\"}]}".getBytes(StandardCharsets.UTF_8));
              return;
            }
            sleep(300); // slow enough for concurrent callers to overlap
            String token = "token-" + tokensIssued.incrementAndGet();
            validToken.set(token);
            respond(
                ex,
                200,
                Map.of("Content-Type", "application/json"),
                ("{\"token\":\"" + token + "\",\"expires_in\":300}")
                    .getBytes(StandardCharsets.UTF_8));
          });
      registry.createContext(
          "/v2/",
          ex -> {
            String token = validToken.get();
            if (token == null
                || !("Bearer " + token).equals(ex.getRequestHeaders().getFirst("Authorization"))) {
              respond(
                  ex,
                  401,
                  Map.of(
                      "WWW-Authenticate",
                      "Bearer realm=\""
                          + base(registry)
                          + "/token\",service=\"test-registry\",scope=\"repository:"
                          + NAME
                          + ":pull\""),
                  new byte[0]);
              return;
            }
            String path = ex.getRequestURI().getPath();
            if (path.contains("/blobs/")) {
              respond(
                  ex,
                  307,
                  Map.of("Location", base(storage) + "/storage/blob?signature=abc"),
                  new byte[0]);
            } else {
              respond(
                  ex,
                  200,
                  Map.of(
                      "Content-Type",
                      MediaTypes.OCI_MANIFEST,
                      "Docker-Content-Digest",
                      Digest.sha256(MANIFEST).toString()),
                  MANIFEST);
            }
          });
      storage.createContext(
          "/storage/",
          ex -> {
            String auth = ex.getRequestHeaders().getFirst("Authorization");
            storageAuthorizations.add(auth == null ? "(none)" : auth);
            respond(ex, 200, Map.of("Content-Type", "application/octet-stream"), BLOB);
          });
    }

    Upstream upstream(String key, String user, String password) {
      return TestUpstreams.upstream(
          key,
          base(registry),
          s -> {
            s.put("username", user);
            s.put("password", password);
            s.put("read-timeout", Duration.ofSeconds(5));
            s.put(
                "redirect.allowed-hosts",
                List.of("127.0.0.1")); // the storage host is another loopback origin
          });
    }
  }

  @Test
  void bearerTokenIsFetchedOnceForConcurrentRequestsAndRefreshedOn401() {
    TokenRegistry fake = new TokenRegistry("robot", "pw");
    Upstream upstream = fake.upstream("bearer", "robot", "pw");

    List<UpstreamManifest> manifests =
        Flux.range(0, 8)
            .flatMap(
                i ->
                    client.getManifest(
                        upstream, NAME, Reference.parse("v1"), MediaTypes.ALL_MANIFESTS, 1 << 20))
            .collectList()
            .block(WAIT);

    assertThat(manifests).hasSize(8).allSatisfy(m -> assertThat(m.body()).isEqualTo(MANIFEST));
    assertThat(fake.tokensIssued).as("single-flight token request").hasValue(1);
    assertThat(fake.tokenQueries.get(0))
        .contains("service=test-registry")
        .contains("scope=repository:team/app:pull");
    assertThat(
            meters
                .get(UpstreamMetrics.REQUEST_TIMER)
                .tags("upstream", "bearer", "kind", "auth", "outcome", "success")
                .timer()
                .count())
        .isEqualTo(1);

    // The registry stops accepting the token: one 401, one new token, success.
    fake.validToken.set("rotated-away");
    UpstreamManifest again =
        client
            .getManifest(upstream, NAME, Reference.parse("v1"), MediaTypes.ALL_MANIFESTS, 1 << 20)
            .block(WAIT);
    assertThat(again.body()).isEqualTo(MANIFEST);
    assertThat(fake.tokensIssued).hasValue(2);
  }

  @Test
  void blobRedirectFollowedWithoutAuthorizationToTheStorageHost() {
    TokenRegistry fake = new TokenRegistry("robot", "pw");
    Upstream upstream = fake.upstream("redirect", "robot", "pw");

    UpstreamBlob blob = client.getBlob(upstream, NAME, Digest.sha256(BLOB)).block(WAIT);
    assertThat(blob.size()).isEqualTo(BLOB.length);
    assertThat(DataBuffers.join(blob.body(), WAIT)).isEqualTo(BLOB);

    assertThat(fake.storageAuthorizations).containsExactly("(none)");
    assertThat(client.headBlob(upstream, NAME, Digest.sha256(BLOB)).block(WAIT))
        .isEqualTo(BLOB.length);
    assertThat(fake.storageAuthorizations).containsExactly("(none)", "(none)");
    assertThat(fake.tokensIssued)
        .as("one token for manifests and blobs of a repository")
        .hasValue(1);
  }

  @Test
  void tokenEndpointRejectingCredentialsIsUnauthorized() {
    TokenRegistry fake = new TokenRegistry("robot", "pw");
    Upstream upstream = fake.upstream("bearer-wrong", "robot", "not-the-password");

    assertThatThrownBy(
            () ->
                client
                    .getManifest(
                        upstream, NAME, Reference.parse("v1"), MediaTypes.ALL_MANIFESTS, 1 << 20)
                    .block(WAIT))
        .isInstanceOfSatisfying(
            UpstreamException.class,
            e -> {
              assertThat(e.code()).isEqualTo(OciErrorCode.UNAUTHORIZED);
              assertThat(e.getMessage())
                  .contains("bearer-wrong")
                  .contains("/token")
                  .doesNotContain("not-the-password");
            });
  }

  // --- Transport failures ---------------------------------------------------------------------

  @Test
  void closedPortIsUnavailable502NamingTheUpstream() throws Exception {
    int port;
    try (ServerSocket s = new ServerSocket(0, 1, InetAddress.getLoopbackAddress())) {
      port = s.getLocalPort();
    }
    Upstream upstream = TestUpstreams.upstream("closed", "http://127.0.0.1:" + port, s -> {});

    assertThatThrownBy(
            () ->
                client
                    .getManifest(
                        upstream, NAME, Reference.parse("v1"), MediaTypes.ALL_MANIFESTS, 1 << 20)
                    .block(WAIT))
        .isInstanceOfSatisfying(
            UpstreamException.class,
            e -> {
              assertThat(e.code()).isEqualTo(OciErrorCode.UPSTREAM_UNAVAILABLE);
              assertThat(e.status()).isEqualTo(HttpStatus.BAD_GATEWAY);
              assertThat(e.isUnavailable()).isTrue();
              assertThat(e.getMessage())
                  .contains("closed")
                  .contains("127.0.0.1:" + port)
                  .contains("unreachable");
            });
    // a refused connection is transient: tried max-attempts (3) times, each attempt timed
    assertThat(
            meters
                .get(UpstreamMetrics.REQUEST_TIMER)
                .tags("upstream", "closed", "kind", "manifest", "outcome", "unreachable")
                .timer()
                .count())
        .isEqualTo(3);
    assertThat(meters.get(UpstreamResilience.RETRIES).tag("upstream", "closed").counter().count())
        .isEqualTo(2);
  }

  @Test
  void hangingUpstreamTimesOutWith504WithinTheReadTimeout() throws Exception {
    ServerSocket silent = new ServerSocket(0, 50, InetAddress.getLoopbackAddress());
    closeables.add(silent);
    List<Socket> held = new CopyOnWriteArrayList<>();
    Thread acceptor =
        new Thread(
            () -> {
              try {
                while (!silent.isClosed()) {
                  held.add(silent.accept()); // accept, never answer
                }
              } catch (IOException ignored) {
                // closed
              }
            });
    acceptor.setDaemon(true);
    acceptor.start();
    closeables.add(
        () ->
            held.forEach(
                s -> {
                  try {
                    s.close();
                  } catch (IOException ignored) {
                  }
                }));
    Upstream upstream =
        TestUpstreams.upstream(
            "hanging",
            "http://127.0.0.1:" + silent.getLocalPort(),
            s -> s.put("read-timeout", Duration.ofMillis(800)));

    long start = System.nanoTime();
    assertThatThrownBy(() -> client.headBlob(upstream, NAME, Digest.sha256(BLOB)).block(WAIT))
        .isInstanceOfSatisfying(
            UpstreamException.class,
            e -> {
              assertThat(e.status()).isEqualTo(HttpStatus.GATEWAY_TIMEOUT);
              assertThat(e.code()).isEqualTo(OciErrorCode.UPSTREAM_UNAVAILABLE);
              assertThat(e.getMessage())
                  .contains("hanging")
                  .contains("timed out")
                  .contains("read-timeout");
            });
    assertThat(Duration.ofNanos(System.nanoTime() - start)).isLessThan(Duration.ofSeconds(5));
    assertThat(held).as("a read timeout is not retried").hasSize(1);
    assertThat(
            meters
                .get(UpstreamMetrics.REQUEST_TIMER)
                .tags("upstream", "hanging", "kind", "blob", "outcome", "timeout")
                .timer()
                .count())
        .isEqualTo(1);
  }

  @Test
  void blobBodyStallingMidwayFailsWith504() {
    HttpServer server = server();
    server.createContext(
        "/v2/",
        ex -> {
          ex.getResponseHeaders().add("Content-Type", "application/octet-stream");
          ex.sendResponseHeaders(200, 1000);
          OutputStream out = ex.getResponseBody();
          out.write(new byte[10]);
          out.flush();
          sleep(5000); // never sends the rest in time
          ex.close();
        });
    Upstream upstream =
        TestUpstreams.upstream(
            "stall", base(server), s -> s.put("read-timeout", Duration.ofMillis(800)));

    UpstreamBlob blob = client.getBlob(upstream, NAME, Digest.sha256(BLOB)).block(WAIT);
    assertThat(blob.size()).isEqualTo(1000);
    assertThatThrownBy(() -> DataBuffers.join(blob.body(), WAIT))
        .isInstanceOfSatisfying(
            UpstreamException.class,
            e -> {
              assertThat(e.status()).isEqualTo(HttpStatus.GATEWAY_TIMEOUT);
              assertThat(e.getMessage()).contains("stall");
            });
    assertThat(meters.get(UpstreamMetrics.FETCHED_BYTES).tag("upstream", "stall").counter().count())
        .isEqualTo(10);
  }

  @Test
  void blobBodyDrippingBelowTheMinimumTransferRateFailsWith504() {
    // One byte every 200 ms: each read comes well within read-timeout, so only the rate check ends
    // it.
    HttpServer server = server();
    server.createContext(
        "/v2/",
        ex -> {
          ex.getResponseHeaders().add("Content-Type", "application/octet-stream");
          ex.sendResponseHeaders(200, 1000);
          OutputStream out = ex.getResponseBody();
          try {
            for (int i = 0; i < 50; i++) { // at most 10 s
              out.write(1);
              out.flush();
              sleep(200);
            }
          } catch (IOException closedByTheClient) {
            // expected once the cache gives up
          }
          ex.close();
        });
    Upstream upstream =
        TestUpstreams.upstream(
            "drip",
            base(server),
            s -> {
              s.put("read-timeout", Duration.ofSeconds(2));
              s.put("min-transfer-rate", DataSize.ofBytes(100));
              s.put("min-transfer-rate-grace", Duration.ofSeconds(1));
            });

    UpstreamBlob blob = client.getBlob(upstream, NAME, Digest.sha256(BLOB)).block(WAIT);
    assertThatThrownBy(() -> DataBuffers.join(blob.body(), WAIT))
        .isInstanceOfSatisfying(
            UpstreamException.class,
            e -> {
              assertThat(e.status()).isEqualTo(HttpStatus.GATEWAY_TIMEOUT);
              assertThat(e.code()).isEqualTo(OciErrorCode.UPSTREAM_UNAVAILABLE);
              assertThat(e.getMessage()).contains("drip").contains("min-transfer-rate");
            });
  }

  @Test
  void manifestDrippingBelowTheMinimumTransferRateFailsWith504() {
    HttpServer server = server();
    server.createContext(
        "/v2/",
        ex -> {
          ex.getResponseHeaders().add("Content-Type", MediaTypes.OCI_MANIFEST);
          ex.sendResponseHeaders(200, MANIFEST.length);
          OutputStream out = ex.getResponseBody();
          try {
            for (int i = 0; i < MANIFEST.length && i < 50; i++) {
              out.write(MANIFEST[i]);
              out.flush();
              sleep(200);
            }
          } catch (IOException closedByTheClient) {
            // expected once the cache gives up
          }
          ex.close();
        });
    Upstream upstream =
        TestUpstreams.upstream(
            "drip-manifest",
            base(server),
            s -> {
              s.put("read-timeout", Duration.ofSeconds(2));
              s.put("min-transfer-rate", DataSize.ofBytes(100));
              s.put("min-transfer-rate-grace", Duration.ofSeconds(1));
              s.put("retry.max-attempts", 1);
            });

    assertThatThrownBy(
            () ->
                client
                    .getManifest(
                        upstream, NAME, Reference.parse("v1"), MediaTypes.ALL_MANIFESTS, 1 << 20)
                    .block(WAIT))
        .isInstanceOfSatisfying(
            UpstreamException.class,
            e -> {
              assertThat(e.status()).isEqualTo(HttpStatus.GATEWAY_TIMEOUT);
              assertThat(e.getMessage()).contains("drip-manifest").contains("min-transfer-rate");
            });
  }

  // --- Status mapping, headers ----------------------------------------------------------------

  @Test
  void statusesMapToOciErrors() {
    HttpServer server = server();
    server.createContext(
        "/v2/",
        ex -> {
          String tag = ex.getRequestURI().getPath().replaceAll(".*/", "");
          switch (tag) {
            case "limited" -> respond(ex, 429, Map.of("Retry-After", "7"), new byte[0]);
            case "broken" -> respond(ex, 500, Map.of(), "oops".getBytes(StandardCharsets.UTF_8));
            case "busy" -> respond(ex, 503, Map.of("Retry-After", "2"), new byte[0]);
            case "forbidden" ->
                respond(
                    ex,
                    403,
                    Map.of(),
                    "{\"errors\":[{\"code\":\"DENIED\",\"message\":\"no pulls for you\"}]}"
                        .getBytes(StandardCharsets.UTF_8));
            case "baddigest" ->
                respond(
                    ex,
                    200,
                    Map.of(
                        "Docker-Content-Digest",
                        "sha256:nothex",
                        "Content-Type",
                        MediaTypes.OCI_MANIFEST),
                    MANIFEST);
            default -> respond(ex, 404, Map.of(), new byte[0]);
          }
        });
    // mapping only: no retries here (UpstreamResilienceTest covers them)
    Upstream upstream =
        TestUpstreams.upstream("statuses", base(server), s -> s.put("retry.max-attempts", 1));

    assertThat(error(upstream, "limited"))
        .satisfies(
            e -> {
              assertThat(e.code()).isEqualTo(OciErrorCode.TOOMANYREQUESTS);
              assertThat(e.status()).isEqualTo(HttpStatus.TOO_MANY_REQUESTS);
              assertThat(e.retryAfter()).contains(Duration.ofSeconds(7));
              assertThat(e.isUnavailable()).isTrue();
            });
    assertThat(error(upstream, "broken"))
        .satisfies(
            e -> {
              assertThat(e.code()).isEqualTo(OciErrorCode.UPSTREAM_UNAVAILABLE);
              assertThat(e.status()).isEqualTo(HttpStatus.BAD_GATEWAY);
              assertThat(e.getMessage()).contains("statuses").contains("500");
            });
    assertThat(error(upstream, "busy"))
        .satisfies(
            e -> {
              assertThat(e.status()).isEqualTo(HttpStatus.SERVICE_UNAVAILABLE);
              assertThat(e.retryAfter()).contains(Duration.ofSeconds(2));
            });
    assertThat(error(upstream, "forbidden"))
        .satisfies(
            e -> {
              assertThat(e.code()).isEqualTo(OciErrorCode.DENIED);
              assertThat(e.getMessage()).contains("DENIED: no pulls for you");
            });
    assertThat(error(upstream, "baddigest"))
        .satisfies(
            e -> {
              assertThat(e.code()).isEqualTo(OciErrorCode.UPSTREAM_UNAVAILABLE);
              assertThat(e.status()).isEqualTo(HttpStatus.BAD_GATEWAY);
              assertThat(e.getMessage()).contains("upstream sent an invalid digest");
            });
    assertThat(
            meters
                .get(UpstreamMetrics.REQUEST_TIMER)
                .tags("upstream", "statuses", "kind", "manifest", "outcome", "server_error")
                .timer()
                .count())
        .isEqualTo(3); // 500, 503, bad digest
  }

  @Test
  void tagsPassNAndLastAndReturnTheLink() {
    List<String> queries = new CopyOnWriteArrayList<>();
    HttpServer server = server();
    server.createContext(
        "/v2/",
        ex -> {
          queries.add(ex.getRequestURI().getRawQuery());
          respond(
              ex,
              200,
              Map.of(
                  "Content-Type",
                  "application/json",
                  "Link",
                  "</v2/team/app/tags/list?last=b&n=2>; rel=\"next\""),
              "{\"name\":\"team/app\",\"tags\":[\"a\",\"b\"]}".getBytes(StandardCharsets.UTF_8));
        });
    Upstream upstream = TestUpstreams.upstream("tags", base(server), s -> {});

    UpstreamTags tags = client.listTags(upstream, NAME, 2, "0.9").block(WAIT);
    assertThat(queries).containsExactly("n=2&last=0.9");
    assertThat(tags.link()).isEqualTo("</v2/team/app/tags/list?last=b&n=2>; rel=\"next\"");
    assertThat(new String(tags.body(), StandardCharsets.UTF_8))
        .isEqualTo("{\"name\":\"team/app\",\"tags\":[\"a\",\"b\"]}");
  }

  // --- helpers --------------------------------------------------------------------------------

  private UpstreamException error(Upstream upstream, String tag) {
    try {
      client
          .getManifest(upstream, NAME, Reference.parse(tag), MediaTypes.ALL_MANIFESTS, 1 << 20)
          .block(WAIT);
    } catch (UpstreamException e) {
      return e;
    }
    throw new AssertionError("expected an UpstreamException for " + tag);
  }

  private HttpServer server() {
    return ScriptedHttp.server(closeables);
  }

  private static void sleep(long millis) {
    try {
      Thread.sleep(millis);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    }
  }
}
