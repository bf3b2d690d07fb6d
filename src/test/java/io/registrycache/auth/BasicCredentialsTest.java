package io.registrycache.auth;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import java.nio.charset.StandardCharsets;
import java.util.Base64;
import org.junit.jupiter.api.Test;

class BasicCredentialsTest {

  private static String basic(String pair) {
    return "Basic " + Base64.getEncoder().encodeToString(pair.getBytes(StandardCharsets.UTF_8));
  }

  @Test
  void readsUserAndPasswordSplitAtTheFirstColon() {
    BasicCredentials c = BasicCredentials.parse(basic("alice:pa:ss wörd"));
    assertThat(c.user()).isEqualTo("alice");
    assertThat(c.password()).isEqualTo("pa:ss wörd");
    assertThat(c.toString()).doesNotContain("pa:ss");
  }

  @Test
  void schemeIsCaseInsensitiveAndPasswordMayBeEmpty() {
    assertThat(BasicCredentials.parse("bAsIc " + basic("bob:").substring(6)).password()).isEmpty();
  }

  @Test
  void refusesWhatIsNotBasicOrNotReadable() {
    assertThatThrownBy(() -> BasicCredentials.parse("Bearer abc")).isInstanceOf(BasicCredentials.InvalidCredentials.class)
        .hasMessageContaining("only Basic");
    assertThatThrownBy(() -> BasicCredentials.parse("Basic")).isInstanceOf(BasicCredentials.InvalidCredentials.class);
    assertThatThrownBy(() -> BasicCredentials.parse("Basic !!!not-base64")).hasMessageContaining("base64");
    assertThatThrownBy(() -> BasicCredentials.parse(basic("no-colon"))).hasMessageContaining("user:password");
    assertThatThrownBy(() -> BasicCredentials.parse(basic(":password"))).hasMessageContaining("non-empty user");
    assertThatThrownBy(() -> BasicCredentials.parse(basic("a\nb:pw"))).hasMessageContaining("control");
    String badUtf8 = "Basic " + Base64.getEncoder().encodeToString(new byte[] {'a', ':', (byte) 0xc3, (byte) 0x28});
    assertThatThrownBy(() -> BasicCredentials.parse(badUtf8)).hasMessageContaining("UTF-8");
  }

  @Test
  void refusesOverlongHeadersWithoutDecodingThem() {
    String longOne = basic("alice:" + "x".repeat(BasicCredentials.MAX_HEADER_LENGTH));
    assertThatThrownBy(() -> BasicCredentials.parse(longOne)).hasMessageContaining("longer than 8192");
  }
}
