package io.registrycache.auth;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import org.junit.jupiter.api.Test;

class RobotTokensTest {

  static final String TOKEN = "4f9c2a7d1e8b3f6a0c5d9e2b7a4f1c8e";

  @Test
  void verifiesTokensByName() {
    RobotTokens tokens =
        RobotTokens.parse("# robots\nci : " + TOKEN + " \n\nbuild:" + TOKEN + "-other\n");
    assertThat(tokens.contains("ci")).isTrue();
    assertThat(tokens.verify("ci", TOKEN)).isTrue();
    assertThat(tokens.verify("ci", TOKEN + "x")).isFalse();
    assertThat(tokens.verify("ci", TOKEN.substring(1))).isFalse();
    assertThat(tokens.verify("build", TOKEN)).isFalse();
    assertThat(tokens.verify("nobody", TOKEN)).isFalse();
    assertThat(tokens.verify("nobody", "")).isFalse();
    assertThat(tokens.toString()).doesNotContain(TOKEN);
  }

  @Test
  void refusesShortTokensWithoutQuotingThem() {
    assertThatThrownBy(() -> RobotTokens.parse("ci:short-token-123"))
        .hasMessageContaining("robot 'ci'")
        .hasMessageContaining("at least 32")
        .hasMessageNotContaining("short-token-123");
    assertThatThrownBy(() -> RobotTokens.parse("ci" + TOKEN)).hasMessageContaining("name:token");
    assertThatThrownBy(() -> RobotTokens.parse("ci:" + TOKEN + "\nci:" + TOKEN))
        .hasMessageContaining("given twice");
  }
}
