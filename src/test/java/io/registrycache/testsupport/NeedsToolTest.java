package io.registrycache.testsupport;

import static org.assertj.core.api.Assertions.assertThat;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ConditionEvaluationResult;

class NeedsToolTest {

  static final String[] MISSING = {"sh", "no-such-client-registry-cache-test"};

  @Test
  void aMissingToolDisablesOutsideCiAndNamesIt() {
    ConditionEvaluationResult result = NeedsTool.Condition.evaluate(MISSING, false);
    assertThat(result.isDisabled()).isTrue();
    assertThat(result.getReason())
        .hasValueSatisfying(
            r ->
                assertThat(r).contains("no-such-client-registry-cache-test").doesNotContain("sh,"));
  }

  @Test
  void underCiTheTestRunsSoItsOwnCheckFailsIt() {
    assertThat(NeedsTool.Condition.evaluate(MISSING, true).isDisabled()).isFalse();
  }

  @Test
  void toolsOnThePathEnable() {
    assertThat(NeedsTool.Condition.evaluate(new String[] {"sh"}, false).isDisabled()).isFalse();
  }
}
