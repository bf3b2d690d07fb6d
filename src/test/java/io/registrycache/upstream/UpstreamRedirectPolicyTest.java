package io.registrycache.upstream;

import static io.registrycache.testsupport.ScriptedHttp.base;
import static io.registrycache.testsupport.ScriptedHttp.respond;
import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import com.sun.net.httpserver.HttpServer;
import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import io.netty.resolver.DefaultAddressResolverGroup;
import io.netty.util.concurrent.ImmediateEventExecutor;
import io.registrycache.oci.Digest;
import io.registrycache.oci.MediaTypes;
import io.registrycache.oci.OciErrorCode;
import io.registrycache.oci.Reference;
import io.registrycache.oci.RepositoryName;
import io.registrycache.testsupport.DataBuffers;
import io.registrycache.testsupport.ScriptedHttp;
import io.registrycache.testsupport.TestUpstreams;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.function.Consumer;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.springframework.http.HttpStatus;
import org.springframework.mock.env.MockEnvironment;

/**
 * Where an upstream may send the cache (issue 7, points 1 and 4): redirects and token realms to
 * another loopback origin (another port), to the cache's own port, to another scheme; refused by
 * default, followed when allow-listed; credentials to a plain-http realm on another origin.
 */
class UpstreamRedirectPolicyTest {

  private static final Duration WAIT = Duration.ofSeconds(20);
  private static final RepositoryName NAME = RepositoryName.parse("team/app");
  private static final byte[] MANIFEST =
      ("{\"schemaVersion\":2,\"mediaType\":\"" + MediaTypes.OCI_MANIFEST + "\"}")
          .getBytes(StandardCharsets.UTF_8);
  private static final byte[] ACTUATOR =
      "{\"actuator\":\"secret internal state\"}".getBytes(StandardCharsets.UTF_8);

  private final List<AutoCloseable> closeables = new ArrayList<>();
  private ReactorNettyUpstreamClient client;

  /** Another loopback origin (another port): stands for a management port or an internal host. */
  private HttpServer internal;

  private final List<String> internalRequests = new CopyOnWriteArrayList<>();
  private HttpServer upstreamServer;

  @BeforeEach
  void setUp() {
    client = new ReactorNettyUpstreamClient(null, new SimpleMeterRegistry());
    internal = ScriptedHttp.server(closeables);
    internal.createContext(
        "/",
        ex -> {
          internalRequests.add(
              ex.getRequestMethod()
                  + " "
                  + ex.getRequestURI().getPath()
                  + " auth="
                  + ex.getRequestHeaders().getFirst("Authorization"));
          if (ex.getRequestURI().getPath().equals("/token")) {
            respond(
                ex,
                200,
                Map.of("Content-Type", "application/json"),
                "{\"token\":\"internal-token\",\"expires_in\":300}"
                    .getBytes(StandardCharsets.UTF_8));
          } else if (ex.getRequestURI().getPath().startsWith("/blob")) {
            respond(ex, 200, Map.of("Content-Type", "application/octet-stream"), MANIFEST);
          } else {
            respond(
                ex,
                200,
                Map.of(
                    "Content-Type",
                    MediaTypes.OCI_MANIFEST,
                    "Docker-Content-Digest",
                    Digest.sha256(ACTUATOR).toString()),
                ACTUATOR);
          }
        });
    upstreamServer = ScriptedHttp.server(closeables);
  }

  @AfterEach
  void tearDown() throws Exception {
    client.destroy();
    for (AutoCloseable c : closeables) {
      c.close();
    }
  }

  /** An upstream answering every request with a 307 to {@code location}. */
  private Upstream redirectingTo(String location, Consumer<Map<String, Object>> customize) {
    upstreamServer.createContext(
        "/v2/", ex -> respond(ex, 307, Map.of("Location", location), new byte[0]));
    return TestUpstreams.upstream("redirecting", base(upstreamServer), customize);
  }

  private static void refused(Throwable e, String... contains) {
    assertThat(e)
        .isInstanceOfSatisfying(
            UpstreamException.class,
            u -> {
              assertThat(u.code()).isEqualTo(OciErrorCode.UPSTREAM_UNAVAILABLE);
              assertThat(u.status()).isEqualTo(HttpStatus.BAD_GATEWAY);
              assertThat(u.getMessage())
                  .contains("redirecting")
                  .contains("refused")
                  .contains(contains);
            });
  }

  @Test
  void manifestRedirectToAnotherLoopbackOriginIsRefusedAndNothingIsFetched() {
    Upstream upstream = redirectingTo(base(internal) + "/actuator/cache", s -> {});

    Throwable e =
        catchError(
            () ->
                client
                    .getManifest(
                        upstream, NAME, Reference.parse("v1"), MediaTypes.ALL_MANIFESTS, 1 << 20)
                    .block(WAIT));

    refused(
        e,
        "http://127.0.0.1:" + internal.getAddress().getPort(),
        "loopback",
        "redirect.allowed-hosts");
    assertThat(internalRequests).isEmpty();
  }

  @Test
  void blobRedirectToAnotherLoopbackOriginIsFollowedOnlyWhenAllowListed() {
    Digest digest = Digest.sha256(MANIFEST);
    Upstream refusedUpstream = redirectingTo(base(internal) + "/blob?sig=1", s -> {});
    refused(
        catchError(() -> client.getBlob(refusedUpstream, NAME, digest).block(WAIT)), "loopback");
    assertThat(internalRequests).isEmpty();

    Upstream allowed =
        TestUpstreams.upstream(
            "allowed",
            base(upstreamServer),
            s -> s.put("redirect.allowed-hosts", List.of("127.0.0.0/8")));
    UpstreamBlob blob = client.getBlob(allowed, NAME, digest).block(WAIT);
    assertThat(DataBuffers.join(blob.body(), WAIT)).hasSize(MANIFEST.length);
    assertThat(internalRequests).containsExactly("GET /blob auth=null");
  }

  @Test
  void redirectToTheCachesOwnPortIsRefusedEvenWhenAllowListed() {
    client.ownPorts(() -> Set.of(internal.getAddress().getPort()));
    Upstream upstream =
        redirectingTo(
            base(internal) + "/actuator/cache",
            s -> s.put("redirect.allowed-hosts", List.of("127.0.0.1")));

    refused(
        catchError(() -> client.getBlob(upstream, NAME, Digest.sha256(MANIFEST)).block(WAIT)),
        "own port");
    assertThat(internalRequests).isEmpty();
  }

  @Test
  void redirectToThePeerPortOfAClusteredCacheIsRefusedEvenWhenAllowListed() {
    int peerPort = internal.getAddress().getPort();
    client.setEnvironment(
        new MockEnvironment()
            .withProperty("registry-cache.cluster.peers", "127.0.0.1:" + peerPort)
            .withProperty("registry-cache.cluster.peer-port", String.valueOf(peerPort)));
    Upstream upstream =
        redirectingTo(
            base(internal) + "/internal/v1/blobs/x",
            s -> s.put("redirect.allowed-hosts", List.of("127.0.0.1")));

    refused(
        catchError(() -> client.getBlob(upstream, NAME, Digest.sha256(MANIFEST)).block(WAIT)),
        "own port");
    assertThat(internalRequests).isEmpty();
  }

  @Test
  void redirectToAnotherSchemeIsRefused() {
    Upstream upstream =
        redirectingTo(
            "ftp://127.0.0.1:" + internal.getAddress().getPort() + "/x",
            s -> s.put("redirect.allowed-hosts", List.of("127.0.0.1")));
    refused(
        catchError(() -> client.headBlob(upstream, NAME, Digest.sha256(MANIFEST)).block(WAIT)),
        "scheme");
  }

  @Test
  void redirectHopsAreBounded() {
    upstreamServer.createContext(
        "/v2/",
        ex ->
            respond(ex, 307, Map.of("Location", ex.getRequestURI().getPath() + "x"), new byte[0]));
    Upstream upstream =
        TestUpstreams.upstream("looping", base(upstreamServer), s -> s.put("redirect.max-hops", 2));
    assertThatThrownBy(() -> client.headBlob(upstream, NAME, Digest.sha256(MANIFEST)).block(WAIT))
        .isInstanceOfSatisfying(
            UpstreamException.class,
            e ->
                assertThat(e.getMessage())
                    .contains("more than 2 redirects")
                    .contains("redirect.max-hops"));
  }

  // --- token realms ---------------------------------------------------------------------------

  /** An upstream whose Bearer challenge names the realm {@code <internal>/token}. */
  private Upstream challengingWithInternalRealm(
      String key, Consumer<Map<String, Object>> customize) {
    try {
      upstreamServer.removeContext(
          "/v2/"); // a second call in one test: the JDK refuses a path twice
    } catch (IllegalArgumentException none) {
      // the first call
    }
    upstreamServer.createContext(
        "/v2/",
        ex -> {
          if ("Bearer internal-token".equals(ex.getRequestHeaders().getFirst("Authorization"))) {
            respond(ex, 200, Map.of(), new byte[5]);
          } else {
            respond(
                ex,
                401,
                Map.of("WWW-Authenticate", "Bearer realm=\"" + base(internal) + "/token\""),
                new byte[0]);
          }
        });
    return TestUpstreams.upstream(key, base(upstreamServer), customize);
  }

  @Test
  void tokenRealmOnAnotherLoopbackOriginIsRefusedUnlessAllowListed() {
    Upstream upstream = challengingWithInternalRealm("redirecting", s -> {});
    Throwable e =
        catchError(() -> client.headBlob(upstream, NAME, Digest.sha256(new byte[5])).block(WAIT));
    refused(e, "token realm", "loopback");
    assertThat(internalRequests).isEmpty();

    Upstream allowed =
        challengingWithInternalRealm(
            "realm-allowed", s -> s.put("redirect.allowed-hosts", List.of("127.0.0.1")));
    assertThat(client.headBlob(allowed, NAME, Digest.sha256(new byte[5])).block(WAIT)).isEqualTo(5);
    assertThat(internalRequests).singleElement().asString().startsWith("GET /token auth=null");
  }

  @Test
  void credentialsGoToAPlainHttpRealmOnAnotherOriginOnlyWhenConfigured() {
    Upstream upstream =
        challengingWithInternalRealm(
            "creds",
            s -> {
              s.put("redirect.allowed-hosts", List.of("127.0.0.1"));
              s.put("username", "robot");
              s.put("password", "hunter2");
            });
    assertThatThrownBy(
            () -> client.headBlob(upstream, NAME, Digest.sha256(new byte[5])).block(WAIT))
        .isInstanceOfSatisfying(
            UpstreamException.class,
            e -> {
              assertThat(e.code()).isEqualTo(OciErrorCode.UNAUTHORIZED);
              assertThat(e.getMessage())
                  .contains("creds")
                  .contains("only over https")
                  .contains("send-credentials-over-http")
                  .doesNotContain("hunter2");
            });
    assertThat(internalRequests).isEmpty();

    Upstream opted =
        challengingWithInternalRealm(
            "creds-opted",
            s -> {
              s.put("redirect.allowed-hosts", List.of("127.0.0.1"));
              s.put("username", "robot");
              s.put("password", "hunter2");
              s.put("send-credentials-over-http", true);
            });
    assertThat(client.headBlob(opted, NAME, Digest.sha256(new byte[5])).block(WAIT)).isEqualTo(5);
    assertThat(internalRequests).singleElement().asString().startsWith("GET /token auth=Basic ");
  }

  @Test
  void addressesAreCheckedAgainWhenConnecting() throws Exception {
    // The resolver of the upstream's connections applies the policy to what a name resolves to
    // at connect time (a rebinding DNS answer included), not only to the earlier check.
    int internalPort = internal.getAddress().getPort();
    Upstream upstream = TestUpstreams.upstream("rebinding", base(upstreamServer), s -> {});
    UpstreamAddressPolicy policy = new UpstreamAddressPolicy(Set::of);
    var resolver =
        policy
            .resolverGroup(upstream, DefaultAddressResolverGroup.INSTANCE)
            .getResolver(ImmediateEventExecutor.INSTANCE);

    var refused =
        resolver.resolve(InetSocketAddress.createUnresolved("localhost", internalPort)).await();
    assertThat(refused.isSuccess()).isFalse();
    assertThat(refused.cause())
        .isInstanceOf(UpstreamAddressPolicy.Refused.class)
        .hasMessageContaining("rebinding")
        .hasMessageContaining("connection to localhost:" + internalPort)
        .hasMessageContaining("loopback");
    assertThat(
            resolver
                .resolveAll(InetSocketAddress.createUnresolved("localhost", internalPort))
                .await()
                .isSuccess())
        .isFalse();
    // the upstream's own host and port are not checked
    var own =
        resolver
            .resolve(
                InetSocketAddress.createUnresolved(
                    "127.0.0.1", upstreamServer.getAddress().getPort()))
            .await();
    assertThat(own.isSuccess()).isTrue();

    Upstream allowed =
        TestUpstreams.upstream(
            "rebinding-allowed",
            base(upstreamServer),
            s -> s.put("redirect.allowed-hosts", List.of("localhost")));
    var allowedResolver =
        policy
            .resolverGroup(allowed, DefaultAddressResolverGroup.INSTANCE)
            .getResolver(ImmediateEventExecutor.INSTANCE);
    assertThat(
            allowedResolver
                .resolve(InetSocketAddress.createUnresolved("localhost", internalPort))
                .await()
                .isSuccess())
        .isTrue();
    assertThat(
            UpstreamErrors.fromTransport(upstream, "x", new RuntimeException(refused.cause()))
                .getMessage())
        .contains("refused");
  }

  @Test
  void privateAndLocalRangesAreRestricted() throws Exception {
    for (String address :
        List.of(
            "127.0.0.1",
            "::1",
            "0.0.0.0",
            "169.254.169.254",
            "fe80::1",
            "224.0.0.1",
            "10.1.2.3",
            "172.16.0.1",
            "172.31.255.255",
            "192.168.1.1",
            "fc00::1",
            "fd12::1")) {
      assertThat(UpstreamAddressPolicy.restrictedKind(InetAddress.getByName(address)))
          .as(address)
          .isNotNull();
    }
    for (String address : List.of("8.8.8.8", "172.32.0.1", "2001:db8::1", "192.169.0.1")) {
      assertThat(UpstreamAddressPolicy.restrictedKind(InetAddress.getByName(address)))
          .as(address)
          .isNull();
    }
    assertThat(UpstreamAddressPolicy.matches("10.0.0.0/8", InetAddress.getByName("10.200.1.1")))
        .isTrue();
    assertThat(UpstreamAddressPolicy.matches("10.0.0.0/8", InetAddress.getByName("11.0.0.1")))
        .isFalse();
    assertThat(UpstreamAddressPolicy.matches("172.16.0.0/12", InetAddress.getByName("172.20.0.1")))
        .isTrue();
    assertThat(UpstreamAddressPolicy.matches("fd00::/8", InetAddress.getByName("fd12::1")))
        .isTrue();
    assertThat(UpstreamAddressPolicy.matches("storage.internal", InetAddress.getByName("10.0.0.1")))
        .isFalse();
    // A prefix out of range holds nothing (it once matched every address).
    assertThat(UpstreamAddressPolicy.matches("10.0.0.0/-1", InetAddress.getByName("192.168.1.1")))
        .isFalse();
    assertThat(UpstreamAddressPolicy.matches("10.0.0.0/33", InetAddress.getByName("10.0.0.1")))
        .isFalse();
    assertThat(UpstreamAddressPolicy.matches("10.0.0.1", InetAddress.getByName("10.0.0.1")))
        .isTrue();
    assertThat(UpstreamAddressPolicy.matches("10.0.0.0/8", InetAddress.getByName("fd12::1")))
        .isFalse();
  }

  private static Throwable catchError(Runnable call) {
    try {
      call.run();
    } catch (Throwable t) {
      return t;
    }
    throw new AssertionError("expected an error");
  }
}
