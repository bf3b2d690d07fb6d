package io.registrycache.api;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.registrycache.config.RegistryCacheProperties;
import io.registrycache.oci.OciErrorCode;
import io.registrycache.oci.OciException;
import io.registrycache.upstream.Upstreams;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.regex.Pattern;
import org.junit.jupiter.api.Test;

class RequestTargetTest {

  private static Upstreams upstreams(boolean allowAny) {
    RegistryCacheProperties props =
        RegistryCacheProperties.bind(
            Map.of(
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
    assertThat(
            RequestTarget.resolve("hub.example.test/alpine", null, upstreams(false))
                .upstream()
                .key())
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
    RequestTarget longName =
        RequestTarget.resolve("index.hub.example.test/library/alpine", null, u);
    assertThat(shortName.name()).isEqualTo(longName.name());
    assertThat(shortName.upstream()).isSameAs(longName.upstream());
    assertThat(longName.name().value()).isEqualTo("library/alpine");
  }

  @Test
  void unconfiguredHostIsDeniedUnlessAnyUpstreamIsAllowed() {
    assertThatThrownBy(
            () -> RequestTarget.resolve("other.example.test/app", null, upstreams(false)))
        .isInstanceOfSatisfying(
            OciException.class, e -> assertThat(e.code()).isEqualTo(OciErrorCode.DENIED));
    assertThatThrownBy(() -> RequestTarget.resolve("app", "other.example.test", upstreams(false)))
        .isInstanceOfSatisfying(
            OciException.class, e -> assertThat(e.code()).isEqualTo(OciErrorCode.DENIED));
    RequestTarget t = RequestTarget.resolve("other.example.test/app", null, upstreams(true));
    assertThat(t.upstream().url().toString()).isEqualTo("https://other.example.test");
  }

  @Test
  void malformedHostOrNameIsNameInvalid() {
    assertThatThrownBy(() -> RequestTarget.resolve("app", "bad host!", upstreams(false)))
        .isInstanceOfSatisfying(
            OciException.class, e -> assertThat(e.code()).isEqualTo(OciErrorCode.NAME_INVALID));
    assertThatThrownBy(
            () -> RequestTarget.resolve("localhost:5000/Team/App", null, upstreams(false)))
        .isInstanceOfSatisfying(
            OciException.class, e -> assertThat(e.code()).isEqualTo(OciErrorCode.NAME_INVALID));
    assertThatThrownBy(() -> RequestTarget.resolve("a//b", null, upstreams(false)))
        .isInstanceOfSatisfying(
            OciException.class, e -> assertThat(e.code()).isEqualTo(OciErrorCode.NAME_INVALID));
  }

  /**
   * The definition {@link RequestTarget#validHost} must keep (before it became a character scan).
   */
  private static final Pattern HOST =
      Pattern.compile(
          "(?:[a-zA-Z0-9](?:[a-zA-Z0-9-]{0,61}[a-zA-Z0-9])?(?:\\.[a-zA-Z0-9](?:[a-zA-Z0-9-]{0,61}[a-zA-Z0-9])?)*"
              + "|\\[[0-9a-fA-F:.]+\\])(?::[0-9]{1,5})?");

  private static boolean byDefinition(String host) {
    return host.length() <= 255 && HOST.matcher(host).matches();
  }

  @Test
  void registryHostsAcceptedAndRejected() {
    String label63 = "a".repeat(63);
    List<String> accepted =
        List.of(
            "localhost",
            "localhost:5000",
            "registry.example.test",
            "registry.example.test:443",
            "a",
            "a:1",
            "10.0.0.1",
            "10.0.0.1:65535",
            "99999:99999",
            "[::1]",
            "[::1]:5000",
            "[fe80::1.2.3.4]",
            "[.]",
            "[:]",
            "xn--bcher-kva.example",
            "a-b.c-d",
            "A0.b1.C2",
            "1-2",
            label63,
            label63 + "." + label63,
            "a.".repeat(127) + "a",
            "b.".repeat(126) + "bbb");
    List<String> rejected =
        List.of(
            "",
            ":",
            ":5000",
            "host:",
            "host:123456",
            "host:12a",
            "host:-1",
            "host::1",
            "-a",
            "a-",
            "a.-b",
            "a-.b",
            "a..b",
            ".a",
            "a.",
            "a_b",
            "a b",
            "bad host!",
            "a/b",
            "[]",
            "[::1",
            "::1]",
            "[::1]x",
            "[g::1]",
            "[::1]:",
            "[::1]:123456",
            "a" + "a".repeat(63),
            label63 + ".a" + "a".repeat(63),
            "é.example",
            "a\u0663:1",
            "host:\u0663",
            "a.".repeat(127) + "aa",
            "a:5000:1",
            "[[::1]]",
            "a[::1]");
    for (String host : accepted) {
      assertThat(byDefinition(host)).as("definition accepts %s", host).isTrue();
      assertThat(RequestTarget.validHost(host)).as("accepts %s", host).isTrue();
    }
    for (String host : rejected) {
      assertThat(byDefinition(host)).as("definition rejects %s", host).isFalse();
      assertThat(RequestTarget.validHost(host)).as("rejects %s", host).isFalse();
    }
  }

  @Test
  void registryHostCheckAnswersAsItsDefinitionOnRandomStrings() {
    String[] pieces = {
      "a",
      "Z",
      "0",
      "9",
      "-",
      ".",
      ":",
      "[",
      "]",
      "f",
      "x",
      " ",
      "_",
      "\u0663",
      "é",
      "5000",
      "a".repeat(61),
      "b".repeat(62),
      "c".repeat(63),
      "d".repeat(64),
      "::1"
    };
    Random random = new Random(29);
    int accepted = 0;
    for (int i = 0; i < 50_000; i++) {
      StringBuilder s = new StringBuilder();
      int n = random.nextInt(8);
      for (int j = 0; j < n; j++) {
        s.append(pieces[random.nextInt(pieces.length)]);
      }
      String host = s.toString();
      boolean expected = byDefinition(host);
      accepted += expected ? 1 : 0;
      assertThat(RequestTarget.validHost(host)).as("%s", host).isEqualTo(expected);
    }
    assertThat(accepted).as("the random strings include valid hosts").isGreaterThan(1_000);
  }
}
