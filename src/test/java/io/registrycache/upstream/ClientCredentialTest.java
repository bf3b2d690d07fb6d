package io.registrycache.upstream;

import static org.assertj.core.api.Assertions.assertThat;

import io.registrycache.oci.RepositoryName;
import io.registrycache.testsupport.TestUpstreams;
import org.junit.jupiter.api.Test;

/** {@link ClientCredential} and how an {@link Upstream} carries it for a pass-through upstream. */
class ClientCredentialTest {

  private static final ClientCredential ALICE = new ClientCredential("alice", "s3cret-pw");

  @Test
  void theIdIsAnHmacThatTellsCredentialsApartAndHidesThePassword() {
    assertThat(ALICE.id())
        .hasSize(64)
        .isEqualTo(new ClientCredential("alice", "s3cret-pw").id())
        .doesNotContain("s3cret")
        .doesNotContain("alice");
    assertThat(new ClientCredential("alice", "other").id()).isNotEqualTo(ALICE.id());
    assertThat(new ClientCredential("alic", "es3cret-pw").id())
        .as("user and password are separated")
        .isNotEqualTo(ALICE.id());
    assertThat(ClientCredential.ANONYMOUS.id()).isEqualTo("anonymous");
    assertThat(new ClientCredential(null, null).anonymous()).isTrue();
  }

  @Test
  void neverPrintsThePassword() {
    assertThat(ALICE.toString()).contains("alice").doesNotContain("s3cret");
    Upstream upstream =
        TestUpstreams.upstream(
                "private", "http://registry.invalid", s -> s.put("credentials", "passthrough"))
            .forClient(ALICE);
    assertThat(upstream.toString()).doesNotContain("s3cret").doesNotContain("alice");
    assertThat(upstream.settings().toString()).contains("credentials=passthrough");
  }

  @Test
  void onlyAPassthroughUpstreamCarriesAClientsCredentials() {
    Upstream cache = TestUpstreams.upstream("public", "http://registry.invalid", s -> {});
    assertThat(cache.passthrough()).isFalse();
    assertThat(cache.forClient(ALICE)).isSameAs(cache);

    Upstream passthrough =
        TestUpstreams.upstream(
            "private", "http://registry.invalid", s -> s.put("credentials", "passthrough"));
    assertThat(passthrough.passthrough()).isTrue();
    assertThat(passthrough.clientCredential()).isEqualTo(ClientCredential.ANONYMOUS);
    Upstream alices = passthrough.forClient(ALICE);
    assertThat(alices.clientCredential()).isEqualTo(ALICE);
    assertThat(alices.key()).isEqualTo("private");
    assertThat(alices.withoutClient()).isEqualTo(passthrough);
    assertThat(passthrough.forClient(null).clientCredential())
        .isEqualTo(ClientCredential.ANONYMOUS);
  }

  @Test
  void upstreamAuthorizationsAreKeptPerClientOnAPassthroughUpstreamOnly() {
    RepositoryName name = RepositoryName.parse("team/app");
    Upstream passthrough =
        TestUpstreams.upstream(
            "private", "http://registry.invalid", s -> s.put("credentials", "passthrough"));
    assertThat(UpstreamAuthenticator.Key.of(passthrough.forClient(ALICE), name))
        .isNotEqualTo(
            UpstreamAuthenticator.Key.of(
                passthrough.forClient(new ClientCredential("bob", "x")), name))
        .isNotEqualTo(
            UpstreamAuthenticator.Key.of(
                passthrough.forClient(new ClientCredential("alice", "x")), name))
        .isEqualTo(
            UpstreamAuthenticator.Key.of(
                passthrough.forClient(new ClientCredential("alice", "s3cret-pw")), name));
    assertThat(UpstreamAuthenticator.Key.of(passthrough.forClient(ALICE), name).toString())
        .doesNotContain("s3cret");
    Upstream cache = TestUpstreams.upstream("public", "http://registry.invalid", s -> {});
    assertThat(UpstreamAuthenticator.Key.of(cache, name))
        .isEqualTo(new UpstreamAuthenticator.Key("public", "team/app", ""));
  }
}
