package io.registrycache.api;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.registrycache.config.RegistryCacheProperties;
import io.registrycache.oci.OciErrorCode;
import io.registrycache.oci.OciException;
import io.registrycache.upstream.Upstreams;
import java.util.List;
import org.junit.jupiter.api.Test;

class RequestTargetTest {

  private static Upstreams upstreams(boolean allowAny) {
    RegistryCacheProperties props = RegistryCacheProperties.bind(java.util.Map.of(
        "registry-cache.upstreams.local.host", "localhost:5000",
        "registry-cache.upstreams.local.url", "http://127.0.0.1:5000",
        "registry-cache.upstreams.hub.host", "hub.example.test",
        "registry-cache.upstreams.hub.url", "https://registry-1.hub.example.test",
        "registry-cache.upstreams.hub.aliases", "index.hub.example.test",
        "registry-cache.upstreams.hub.docker-hub-naming", "true",
        "registry-cache.default-upstream", "local",
        "registry-cache.allow-any-upstream", String.valueOf(allowAny)));
    return new Upstreams(props);
  }

  @Test
  void bareFormGoesToTheDefaultUpstream() {
    RequestTarget t = RequestTarget.resolve("team/app", null, upstreams(false));
    assertThat(t.upstream().key()).isEqualTo("local");
    assertThat(t.name().value()).isEqualTo("team/app");
    assertThat(t.namespace()).isNull();
  }

  @Test
  void inPathFormNamesTheRegistryHost() {
    RequestTarget t = RequestTarget.resolve("localhost:5000/team/app", null, upstreams(false));
    assertThat(t.upstream().key()).isEqualTo("local");
    assertThat(t.name().value()).isEqualTo("team/app");
    assertThat(RequestTarget.resolve("hub.example.test/alpine", null, upstreams(false)).upstream().key())
        .isEqualTo("hub");
  }

  @Test
  void nsFormUsesTheParameter() {
    RequestTarget t = RequestTarget.resolve("team/app", "localhost:5000", upstreams(false));
    assertThat(t.upstream().key()).isEqualTo("local");
    assertThat(t.name().value()).isEqualTo("team/app");
    assertThat(t.namespace()).isEqualTo("localhost:5000");
  }

  @Test
  void dockerHubNamingMakesBothSpellingsOneEntry() {
    Upstreams u = upstreams(false);
    RequestTarget shortName = RequestTarget.resolve("alpine", "hub.example.test", u);
    RequestTarget longName = RequestTarget.resolve("index.hub.example.test/library/alpine", null, u);
    assertThat(shortName.name()).isEqualTo(longName.name());
    assertThat(shortName.upstream()).isSameAs(longName.upstream());
    assertThat(longName.name().value()).isEqualTo("library/alpine");
  }

  @Test
  void unconfiguredHostIsDeniedUnlessAnyUpstreamIsAllowed() {
    assertThatThrownBy(() -> RequestTarget.resolve("other.example.test/app", null, upstreams(false)))
        .isInstanceOfSatisfying(OciException.class, e -> assertThat(e.code()).isEqualTo(OciErrorCode.DENIED));
    assertThatThrownBy(() -> RequestTarget.resolve("app", "other.example.test", upstreams(false)))
        .isInstanceOfSatisfying(OciException.class, e -> assertThat(e.code()).isEqualTo(OciErrorCode.DENIED));
    RequestTarget t = RequestTarget.resolve("other.example.test/app", null, upstreams(true));
    assertThat(t.upstream().url().toString()).isEqualTo("https://other.example.test");
  }

  @Test
  void malformedHostOrNameIsNameInvalid() {
    assertThatThrownBy(() -> RequestTarget.resolve("app", "bad host!", upstreams(false)))
        .isInstanceOfSatisfying(OciException.class, e -> assertThat(e.code()).isEqualTo(OciErrorCode.NAME_INVALID));
    assertThatThrownBy(() -> RequestTarget.resolve("localhost:5000/Team/App", null, upstreams(false)))
        .isInstanceOfSatisfying(OciException.class, e -> assertThat(e.code()).isEqualTo(OciErrorCode.NAME_INVALID));
    assertThatThrownBy(() -> RequestTarget.resolve("a//b", null, upstreams(false)))
        .isInstanceOfSatisfying(OciException.class, e -> assertThat(e.code()).isEqualTo(OciErrorCode.NAME_INVALID));
  }
}
