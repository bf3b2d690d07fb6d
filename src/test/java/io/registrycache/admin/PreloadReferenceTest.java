package io.registrycache.admin;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.registrycache.api.RequestTarget;
import io.registrycache.config.RegistryCacheProperties;
import io.registrycache.oci.OciErrorCode;
import io.registrycache.oci.OciException;
import io.registrycache.oci.Reference;
import io.registrycache.upstream.Upstreams;
import java.util.Map;
import org.junit.jupiter.api.Test;

class PreloadReferenceTest {

  private static final String DIGEST =
      "sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";

  @Test
  void hostNameAndTag() {
    PreloadReference r = PreloadReference.parse("localhost:5000/demo/app:v1");
    assertThat(r.rawName()).isEqualTo("localhost:5000/demo/app");
    assertThat(r.reference()).isEqualTo(new Reference.Tag("v1"));
  }

  @Test
  void hostWithPortAndNoTagMeansLatest() {
    PreloadReference r = PreloadReference.parse("  registry.example.com:443/team/app \n");
    assertThat(r.text()).isEqualTo("registry.example.com:443/team/app");
    assertThat(r.rawName()).isEqualTo("registry.example.com:443/team/app");
    assertThat(r.reference()).isEqualTo(new Reference.Tag("latest"));
  }

  @Test
  void digestWinsOverTag() {
    PreloadReference r = PreloadReference.parse("registry.example.com/team/x:v2@" + DIGEST);
    assertThat(r.rawName()).isEqualTo("registry.example.com/team/x");
    assertThat(r.reference()).isInstanceOf(Reference.ByDigest.class);
    assertThat(r.reference().toString()).isEqualTo(DIGEST);
    assertThat(PreloadReference.parse("team/x@" + DIGEST).rawName()).isEqualTo("team/x");
  }

  @Test
  void bareName() {
    PreloadReference r = PreloadReference.parse("alpine:3.20");
    assertThat(r.rawName()).isEqualTo("alpine");
    assertThat(r.reference()).isEqualTo(new Reference.Tag("3.20"));
  }

  @Test
  void malformedReferencesAreRejected() {
    assertThatThrownBy(() -> PreloadReference.parse("")).isInstanceOf(OciException.class);
    assertThatThrownBy(() -> PreloadReference.parse("a b:v1")).isInstanceOf(OciException.class);
    assertThatThrownBy(() -> PreloadReference.parse(":v1")).isInstanceOf(OciException.class);
    assertThatThrownBy(() -> PreloadReference.parse("team/app:")).isInstanceOf(OciException.class);
    assertThatThrownBy(() -> PreloadReference.parse("team/app@sha256:xyz"))
        .isInstanceOfSatisfying(
            OciException.class, e -> assertThat(e.code()).isEqualTo(OciErrorCode.DIGEST_INVALID));
    assertThatThrownBy(() -> PreloadReference.parse("team/app@latest"))
        .isInstanceOf(OciException.class);
  }

  @Test
  void resolvesLikeTheRegistryApi() {
    RegistryCacheProperties props =
        RegistryCacheProperties.bind(
            Map.of(
                "registry-cache.upstreams.local.host", "localhost:5000",
                "registry-cache.upstreams.local.url", "http://127.0.0.1:5000",
                "registry-cache.upstreams.hub.host", "hub.example.test",
                "registry-cache.upstreams.hub.url", "https://registry.hub.example.test",
                "registry-cache.upstreams.hub.aliases", "index.hub.example.test",
                "registry-cache.upstreams.hub.docker-hub-naming", "true",
                "registry-cache.default-upstream", "local"));
    Upstreams upstreams = new Upstreams(props);

    RequestTarget hubTarget =
        RequestTarget.resolve(
            PreloadReference.parse("index.hub.example.test/alpine:3").rawName(), null, upstreams);
    assertThat(hubTarget.upstream().key()).isEqualTo("hub");
    assertThat(hubTarget.name().value()).isEqualTo("library/alpine");

    RequestTarget bare =
        RequestTarget.resolve(PreloadReference.parse("demo/app:v1").rawName(), null, upstreams);
    assertThat(bare.upstream().key()).isEqualTo("local");
    assertThat(bare.name().value()).isEqualTo("demo/app");

    assertThatThrownBy(
            () ->
                RequestTarget.resolve(
                    PreloadReference.parse("registry.example.com/x:v1").rawName(), null, upstreams))
        .isInstanceOfSatisfying(
            OciException.class, e -> assertThat(e.code()).isEqualTo(OciErrorCode.DENIED));
  }
}
