package io.registrycache.auth;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import java.nio.charset.StandardCharsets;
import java.util.Base64;
import java.util.List;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/** The one reader of the {@code Authorization} header ({@link Credentials#parse}). */
class CredentialsTest {

  private static String basic(String pair) {
    return "Basic " + Base64.getEncoder().encodeToString(pair.getBytes(StandardCharsets.UTF_8));
  }

  private static Credentials parse(String header) {
    return Credentials.parse(List.of(header));
  }

  @Test
  void readsUserAndPasswordSplitAtTheFirstColon() {
    assertThat(parse(basic("alice:pa:ss wörd")))
        .isEqualTo(new BasicCredentials("alice", "pa:ss wörd"));
    assertThat(parse(basic("alice:pa:ss")).toString()).doesNotContain("pa:ss");
  }

  @Test
  void schemesAreCaseInsensitiveAndPasswordMayBeEmpty() {
    assertThat(parse("bAsIc " + basic("bob:").substring(6)))
        .isEqualTo(new BasicCredentials("bob", ""));
    assertThat(parse("bearer abc.def-_~+/==")).isEqualTo(new Credentials.Bearer("abc.def-_~+/=="));
    assertThat(parse("Bearer abc").toString()).doesNotContain("abc");
  }

  @Test
  void noHeaderAndEmptyBasicCredentialsAreNone() {
    assertThat(Credentials.parse(List.of())).isSameAs(Credentials.NONE);
    assertThat(Credentials.parse(null)).isSameAs(Credentials.NONE);
    assertThat(parse("Basic Og=="))
        .as("containers/image without credentials")
        .isSameAs(Credentials.NONE);
  }

  @Test
  void refusesWhatIsNotReadable() {
    assertThatThrownBy(() -> parse("Basic")).isInstanceOf(Credentials.Invalid.class);
    assertThatThrownBy(() -> parse("Basic !!!not-base64")).hasMessageContaining("base64");
    assertThatThrownBy(() -> parse(basic("no-colon"))).hasMessageContaining("user:password");
    assertThatThrownBy(() -> parse(basic(":password"))).hasMessageContaining("non-empty user");
    assertThatThrownBy(() -> parse(basic("a\nb:pw"))).hasMessageContaining("control");
    String badUtf8 =
        "Basic "
            + Base64.getEncoder().encodeToString(new byte[] {'a', ':', (byte) 0xc3, (byte) 0x28});
    assertThatThrownBy(() -> parse(badUtf8)).hasMessageContaining("UTF-8");
    assertThatThrownBy(() -> Credentials.parse(List.of(basic("a:b"), basic("a:b"))))
        .hasMessageContaining("more than one");
  }

  @ParameterizedTest
  @ValueSource(
      strings = {
        "Bearer",
        "Bearer ",
        "Bearer a b",
        "Bearer a=b",
        "Bearer =abc",
        "Bearer ab\"c",
        "Bearer é",
        "Bearer a,b"
      })
  void refusesBearerTokensThatAreNotToken68(String header) {
    assertThatThrownBy(() -> parse(header))
        .isInstanceOf(Credentials.Invalid.class)
        .hasMessageContaining("bearer token is malformed");
  }

  @ParameterizedTest
  @ValueSource(
      strings = {"Digest username=\"a\"", "Negotiate abc", "", "   ", "Basicabc", "Token abc"})
  void refusesOtherSchemesWithoutQuotingTheValue(String header) {
    assertThatThrownBy(() -> parse(header))
        .isInstanceOf(Credentials.Invalid.class)
        .hasMessageContaining("Basic or Bearer")
        .hasMessageNotContaining("abc");
  }

  @Test
  void refusesOverlongHeadersWithoutDecodingThem() {
    String longOne = basic("alice:" + "x".repeat(Credentials.MAX_HEADER_LENGTH));
    assertThatThrownBy(() -> parse(longOne)).hasMessageContaining("longer than 8192");
  }

  @Test
  void challengesQuoteWhatTheyAreGiven() {
    assertThat(Challenges.basic("corp cache"))
        .isEqualTo("Basic realm=\"corp cache\", charset=\"UTF-8\"");
    assertThat(Challenges.bearer("registry-cache peers"))
        .isEqualTo("Bearer realm=\"registry-cache peers\"");
    assertThat(Challenges.bearer("http://h/v2/token", "svc", Challenges.pullScope("team/app")))
        .isEqualTo(
            "Bearer realm=\"http://h/v2/token\",service=\"svc\",scope=\"repository:team/app:pull\"");
    assertThat(Challenges.bearer("a\"b\\c\r\nd")).isEqualTo("Bearer realm=\"a\\\"b\\\\cd\"");
  }
}
