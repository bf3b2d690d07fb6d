package io.registrycache.api;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.registrycache.oci.OciErrorCode;
import io.registrycache.oci.OciException;
import java.util.List;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/** What the registry port's one target parser accepts, refuses, and hands on. */
class HttpTargetTest {

  private static final List<String> HOST = List.of("cache.example:8080");

  @Test
  void originFormIsDecodedSegmentBySegment() {
    HttpTarget target =
        HttpTarget.parse("/v2/team/app%2Dx/manifests/v1?ns=upstream.example&n=5", HOST);
    assertThat(target.registry()).isTrue();
    assertThat(target.rawPath()).isEqualTo("/v2/team/app%2Dx/manifests/v1");
    assertThat(target.path()).isEqualTo("team/app-x/manifests/v1");
    assertThat(target.queryParam("ns")).isEqualTo("upstream.example");
    assertThat(target.queryParam("n")).isEqualTo("5");
    assertThat(target.queryParam("last")).isNull();
    assertThat(target.absoluteUri("http"))
        .hasToString("http://cache.example:8080/v2/team/app%2Dx/manifests/v1");
  }

  @Test
  void absoluteFormIsAcceptedAndItsAuthorityReplacesHost() {
    HttpTarget target =
        HttpTarget.parse("http://other.example:5000/v2/app/blobs/sha256:ab?ns=x.example", HOST);
    assertThat(target.path()).isEqualTo("app/blobs/sha256:ab");
    assertThat(target.authority()).isEqualTo("other.example:5000");
    assertThat(target.queryParam("ns")).isEqualTo("x.example");
    assertThat(HttpTarget.parse("HTTPS://[::1]:8443/v2/", List.of()).base()).isTrue();
  }

  @ParameterizedTest
  @ValueSource(strings = {"/v2", "/v2/", "/v2/?x=1"})
  void theBaseEndpoint(String target) {
    assertThat(HttpTarget.parse(target, HOST).base()).isTrue();
  }

  @ParameterizedTest
  @ValueSource(
      strings = {
        "/actuator/health",
        "/",
        "/favicon.ico",
        "/v22/x",
        "/v2x",
        "*",
        "http://h/actuator"
      })
  void targetsOutsideV2AreNotTheRegistrys(String target) {
    assertThat(HttpTarget.parse(target, HOST).registry()).isFalse();
  }

  @ParameterizedTest
  @ValueSource(
      strings = {
        "/v2/app%2Fmanifests/latest", // an escaped '/' between the repository and the endpoint
        "/v2/app%2fx/blobs/sha256:ab",
        "/v2/app;x=y/manifests/latest", // path parameters
        "/v2/app/manifests/latest;v=1",
        "/v2/app/../other/manifests/latest", // dot segments, plain and escaped
        "/v2/./app/manifests/latest",
        "/v2/app/%2e%2E/manifests/latest",
        "/v2//app/manifests/latest", // a doubled slash
        "/v2/app//manifests/latest",
        "/v2/app%zz/manifests/latest", // malformed escapes
        "/v2/app/blobs/sha256%4",
        "/v2/app/tags/list?n=%zz",
        "/v2/app/manifests/latest?ns=%G0",
        "/v2/app%C3%A9/manifests/latest", // non-ASCII, escaped and raw
        "/v2/app\u00e9/manifests/latest",
        "/v2/app%00/manifests/latest", // control characters
        "/v2/evil%0d%0aline/manifests/latest",
        "/v2/app name/manifests/latest",
        "/v2/a\"b/manifests/latest", // characters no URI has
        "/v2/a{b}/manifests/latest",
        "/v2/a[1]/manifests/latest",
        "/v2/app/manifests/latest#frag",
        "/%76%32/app/manifests/latest", // "v2" spelt another way
        "/v2;x=1/app/manifests/latest",
        "/v%32/",
        "host.example:443", // authority-form
      })
  void targetsThatCouldBeSpeltAnotherWayAreRefusedWithNameInvalid(String target) {
    assertThatThrownBy(() -> HttpTarget.parse(target, HOST))
        .isInstanceOfSatisfying(
            OciException.class,
            e -> {
              assertThat(e.code()).isEqualTo(OciErrorCode.NAME_INVALID);
              assertThat(e.status().value()).isEqualTo(400);
            });
  }

  @ParameterizedTest
  @ValueSource(
      strings = {
        "cache\"x",
        "cache x",
        "cache{x}",
        "cache|x",
        "cache\\x",
        "cache^x",
        "cache<x>",
        "cache`x",
        "",
        ":8080",
        "cache:",
        "cache:123456",
        "cache:80a",
        "[::1",
        "[zz]",
        "[E]",
        "[1:2]",
        "[::1::2]",
        "user@cache",
        "cache/x",
        "cache,other"
      })
  void hostsThatAreNotHostAndPortAreRefused(String host) {
    assertThatThrownBy(() -> HttpTarget.parse("/v2/", List.of(host)))
        .isInstanceOfSatisfying(
            OciException.class, e -> assertThat(e.status().value()).isEqualTo(400));
  }

  @ParameterizedTest
  @ValueSource(
      strings = {
        "localhost",
        "cache.example:8080",
        "127.0.0.1:5000",
        "[::1]:8080",
        "[fe80::1]",
        "my_cache-1.internal~x"
      })
  void hostsThatAreHostAndPortAreAccepted(String host) {
    assertThat(HttpTarget.parse("/v2/", List.of(host)).authority()).isEqualTo(host);
  }

  @Test
  void twoHostHeadersAreRefused() {
    assertThatThrownBy(() -> HttpTarget.parse("/v2/", List.of("a.example", "b.example")))
        .isInstanceOf(OciException.class)
        .hasMessageContaining("more than one Host");
  }

  @Test
  void withoutAHostTheRealmCannotBeBuiltAndThatIsA400NotA500() {
    HttpTarget target = HttpTarget.parse("/v2/app/manifests/v1", List.of());
    assertThat(target.authority()).isNull();
    assertThatThrownBy(() -> target.absoluteUri("http"))
        .isInstanceOfSatisfying(
            OciException.class, e -> assertThat(e.status().value()).isEqualTo(400));
  }
}
