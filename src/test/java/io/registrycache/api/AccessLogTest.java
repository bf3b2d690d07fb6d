package io.registrycache.api;

import static org.assertj.core.api.Assertions.assertThat;

import io.registrycache.auth.Identity;
import org.junit.jupiter.api.Test;

/** How the access log writes an identity: a plain name as it is, anything else quoted. */
class AccessLogTest {

  @Test
  void plainNamesAsTheyAreOthersQuotedAndEscaped() {
    assertThat(AccessLog.value(new Identity(Identity.Kind.ROBOT, "ci-bot").logName()))
        .isEqualTo("robot:ci-bot");
    assertThat(AccessLog.value(new Identity(Identity.Kind.USER, "alice@corp.example").logName()))
        .isEqualTo("user:alice@corp.example");
    assertThat(AccessLog.value(Identity.ANONYMOUS.logName())).isEqualTo("anonymous");
    assertThat(
            AccessLog.value(new Identity(Identity.Kind.USER, "eve status=200 x=\"y\\").logName()))
        .isEqualTo("\"user:eve status=200 x=\\\"y\\\\\"");
  }
}
