package io.registrycache.proxy;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import io.registrycache.config.RegistryCacheProperties;
import io.registrycache.metrics.CacheMetrics;
import io.registrycache.oci.Digest;
import io.registrycache.oci.OciErrorCode;
import io.registrycache.oci.OciException;
import io.registrycache.oci.Reference;
import io.registrycache.oci.RepositoryName;
import io.registrycache.testsupport.TestUpstreams;
import io.registrycache.upstream.ClientCredential;
import io.registrycache.upstream.Upstream;
import io.registrycache.upstream.UpstreamBlob;
import io.registrycache.upstream.UpstreamClient;
import io.registrycache.upstream.UpstreamException;
import io.registrycache.upstream.UpstreamManifest;
import io.registrycache.upstream.UpstreamManifestHead;
import io.registrycache.upstream.UpstreamTags;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.CopyOnWriteArrayList;
import org.assertj.core.groups.Tuple;
import org.junit.jupiter.api.Test;
import org.springframework.http.HttpStatus;
import reactor.core.publisher.Mono;
import reactor.core.publisher.Sinks;

/**
 * {@link PassthroughAccess}: which {@code HEAD} confirms a client, with whose credentials, what is
 * remembered for whom, and that refusals and failures are the client's answer and not remembered.
 */
class PassthroughAccessTest {

  private static final RepositoryName NAME = RepositoryName.parse("team/app");
  private static final Digest DIGEST = Digest.parse("sha256:" + "ab".repeat(32));
  private static final ClientCredential ALICE = new ClientCredential("alice", "a-secret");
  private static final ClientCredential BOB = new ClientCredential("bob", "b-secret");

  /** One request the stub upstream saw: what, for whom. */
  record Asked(String what, String repository, ClientCredential client) {}

  /** Answers HEADs for the users it lets pull, 401 for others; records every request. */
  static final class StubUpstream implements UpstreamClient {
    final List<Asked> asked = new CopyOnWriteArrayList<>();
    final Set<String> allowed;
    Mono<Object> gate = Mono.just(new Object());

    StubUpstream(Set<String> allowed) {
      this.allowed = allowed;
    }

    private <T> Mono<T> answer(String what, Upstream upstream, RepositoryName name, T value) {
      asked.add(new Asked(what, name.value(), upstream.clientCredential()));
      if (!allowed.contains(upstream.clientCredential().user())) {
        return Mono.error(
            new UpstreamException(
                upstream.key(),
                OciErrorCode.UNAUTHORIZED,
                HttpStatus.UNAUTHORIZED,
                "upstream refuses " + upstream.clientCredential().user(),
                null,
                null));
      }
      return gate.thenReturn(value);
    }

    @Override
    public Mono<UpstreamManifest> getManifest(
        Upstream upstream,
        RepositoryName name,
        Reference reference,
        List<String> accept,
        int maxBytes) {
      return Mono.error(new AssertionError("no GET expected"));
    }

    @Override
    public Mono<UpstreamManifestHead> headManifest(
        Upstream upstream, RepositoryName name, Reference reference, List<String> accept) {
      return answer(
          "manifest " + reference, upstream, name, new UpstreamManifestHead(DIGEST, "x", 1));
    }

    @Override
    public Mono<UpstreamBlob> getBlob(Upstream upstream, RepositoryName name, Digest digest) {
      return Mono.error(new AssertionError("no GET expected"));
    }

    @Override
    public Mono<Long> headBlob(Upstream upstream, RepositoryName name, Digest digest) {
      return answer("blob " + digest, upstream, name, 42L);
    }

    @Override
    public Mono<UpstreamTags> listTags(
        Upstream upstream, RepositoryName name, Integer n, String last) {
      return answer("tags n=" + n, upstream, name, new UpstreamTags(new byte[0], null));
    }
  }

  private static Upstream passthrough(String confirmFor) {
    return TestUpstreams.upstream(
        "private",
        "http://registry.invalid",
        s -> {
          s.put("credentials", "passthrough");
          s.put("confirm-access-for", confirmFor);
        });
  }

  private final SimpleMeterRegistry meters = new SimpleMeterRegistry();

  private PassthroughAccess access(StubUpstream upstream, Map<String, ?> settings) {
    RegistryCacheProperties properties = RegistryCacheProperties.bind(settings);
    return new PassthroughAccess(upstream, properties, new CacheMetrics(meters, properties));
  }

  private double checks(String outcome) {
    var counter =
        meters.find("registry.cache.passthrough.checks").tag("outcome", outcome).counter();
    return counter == null ? 0 : counter.count();
  }

  @Test
  void anUpstreamWithTheCachesCredentialsIsNeverAsked() {
    StubUpstream stub = new StubUpstream(Set.of());
    Upstream cacheCredentials =
        TestUpstreams.upstream("public", "http://registry.invalid", s -> {});
    access(stub, Map.of())
        .confirm(
            cacheCredentials.forClient(ALICE),
            NAME,
            new PassthroughAccess.Probe.Manifest(Reference.parse("v1")))
        .block(Duration.ofSeconds(5));
    assertThat(stub.asked).isEmpty();
  }

  @Test
  void eachClientIsConfirmedWithItsOwnCredentialsByTheHeadOfWhatItAsksFor() {
    StubUpstream stub = new StubUpstream(Set.of("alice", "bob"));
    PassthroughAccess access = access(stub, Map.of());
    Upstream upstream = passthrough("5m");
    access
        .confirm(
            upstream.forClient(ALICE),
            NAME,
            new PassthroughAccess.Probe.Manifest(Reference.parse("v1")))
        .block();
    access.confirm(upstream.forClient(BOB), NAME, new PassthroughAccess.Probe.Blob(DIGEST)).block();
    access
        .confirm(
            upstream.forClient(ClientCredential.ANONYMOUS),
            NAME,
            new PassthroughAccess.Probe.Repository())
        .onErrorResume(e -> Mono.empty())
        .block();
    assertThat(stub.asked)
        .containsExactly(
            new Asked("manifest v1", "team/app", ALICE),
            new Asked("blob " + DIGEST, "team/app", BOB),
            new Asked("tags n=1", "team/app", ClientCredential.ANONYMOUS));
  }

  @Test
  void aConfirmationIsRememberedPerClientAndRepositoryOnly() {
    StubUpstream stub = new StubUpstream(Set.of("alice", "bob"));
    PassthroughAccess access = access(stub, Map.of());
    Upstream upstream = passthrough("5m");
    PassthroughAccess.Probe probe = new PassthroughAccess.Probe.Blob(DIGEST);
    access.confirm(upstream.forClient(ALICE), NAME, probe).block();
    access
        .confirm(
            upstream.forClient(ALICE),
            NAME,
            new PassthroughAccess.Probe.Manifest(Reference.parse("v2")))
        .block();
    assertThat(stub.asked).as("alice's second request in team/app").hasSize(1);
    assertThat(checks("confirmed")).as("remembered ones are not counted").isEqualTo(1);
    access.confirm(upstream.forClient(BOB), NAME, probe).block();
    access
        .confirm(upstream.forClient(new ClientCredential("alice", "other-password")), NAME, probe)
        .onErrorResume(e -> Mono.empty())
        .block();
    access.confirm(upstream.forClient(ALICE), RepositoryName.parse("team/other"), probe).block();
    assertThat(stub.asked)
        .extracting(Asked::client, Asked::repository)
        .containsExactly(
            Tuple.tuple(ALICE, "team/app"),
            Tuple.tuple(BOB, "team/app"),
            Tuple.tuple(new ClientCredential("alice", "other-password"), "team/app"),
            Tuple.tuple(ALICE, "team/other"));
  }

  @Test
  void zeroConfirmAccessForAsksEveryTime() {
    StubUpstream stub = new StubUpstream(Set.of("alice"));
    PassthroughAccess access = access(stub, Map.of());
    Upstream upstream = passthrough("0s");
    for (int i = 0; i < 3; i++) {
      access
          .confirm(upstream.forClient(ALICE), NAME, new PassthroughAccess.Probe.Blob(DIGEST))
          .block();
    }
    assertThat(stub.asked).hasSize(3);
  }

  @Test
  void aRefusalIsTheClientsAnswerAndIsNotRemembered() {
    StubUpstream stub = new StubUpstream(Set.of("alice"));
    PassthroughAccess access = access(stub, Map.of());
    Upstream upstream = passthrough("5m");
    for (int i = 0; i < 2; i++) {
      assertThatThrownBy(
              () ->
                  access
                      .confirm(
                          upstream.forClient(BOB), NAME, new PassthroughAccess.Probe.Blob(DIGEST))
                      .block())
          .isInstanceOfSatisfying(
              OciException.class, e -> assertThat(e.code()).isEqualTo(OciErrorCode.UNAUTHORIZED));
    }
    assertThat(stub.asked).hasSize(2);
    assertThat(checks("refused")).isEqualTo(2);
    assertThat(checks("confirmed")).isZero();
  }

  @Test
  void concurrentConfirmationsOfOneClientShareOneHead() {
    StubUpstream stub = new StubUpstream(Set.of("alice"));
    Sinks.One<Object> release = Sinks.one();
    stub.gate = release.asMono();
    PassthroughAccess access = access(stub, Map.of());
    Upstream upstream = passthrough("5m");
    var first =
        access
            .confirm(upstream.forClient(ALICE), NAME, new PassthroughAccess.Probe.Blob(DIGEST))
            .toFuture();
    var second =
        access
            .confirm(upstream.forClient(ALICE), NAME, new PassthroughAccess.Probe.Blob(DIGEST))
            .toFuture();
    assertThat(first).isNotDone();
    release.tryEmitValue(new Object());
    first.join();
    second.join();
    assertThat(stub.asked).hasSize(1);
  }

  @Test
  void offlineAClientNotConfirmedBeforeIsDenied() {
    StubUpstream stub = new StubUpstream(Set.of("alice"));
    PassthroughAccess access = access(stub, Map.of("registry-cache.offline", "true"));
    assertThatThrownBy(
            () ->
                access
                    .confirm(
                        passthrough("5m").forClient(ALICE),
                        NAME,
                        new PassthroughAccess.Probe.Blob(DIGEST))
                    .block())
        .isInstanceOfSatisfying(
            OciException.class, e -> assertThat(e.code()).isEqualTo(OciErrorCode.DENIED));
    assertThat(stub.asked).isEmpty();
  }
}
