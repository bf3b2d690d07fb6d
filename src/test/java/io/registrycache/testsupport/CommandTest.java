package io.registrycache.testsupport;

import static org.assertj.core.api.Assertions.assertThatCode;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import org.junit.jupiter.api.Test;
import org.opentest4j.TestAbortedException;

/** A missing client (skopeo, ctr) fails the ITs that need it in CI and skips them elsewhere. */
class CommandTest {

  @Test
  void aMissingToolFailsUnderCi() {
    for (String ci : new String[] {"true", "1", "yes"}) {
      assertThatThrownBy(() -> Command.requireTool(false, "skopeo is not installed", ci))
          .isInstanceOf(AssertionError.class)
          .hasMessageContaining("skopeo is not installed");
    }
  }

  @Test
  void aMissingToolSkipsOutsideCi() {
    for (String ci : new String[] {null, "", "false"}) {
      assertThatThrownBy(() -> Command.requireTool(false, "ctr is not installed", ci))
          .isInstanceOf(TestAbortedException.class)
          .hasMessageContaining("ctr is not installed");
    }
  }

  @Test
  void runsInTheGivenDirectoryWithTheGivenEnvironment(@org.junit.jupiter.api.io.TempDir java.nio.file.Path dir)
      throws java.io.IOException {
    Command.Result result = Command.run(java.time.Duration.ofSeconds(30), dir, java.util.Map.of("COMMAND_TEST_VALUE", "forty-two"),
        java.util.List.of("sh", "-c", "pwd; echo \"$COMMAND_TEST_VALUE\""));
    org.assertj.core.api.Assertions.assertThat(result.assertSuccess().output())
        .isEqualTo(dir.toRealPath() + "\nforty-two\n");
  }

  @Test
  void aToolThatIsThereNeitherFailsNorSkips() {
    assertThatCode(() -> Command.requireTool(true, "unused", "true")).doesNotThrowAnyException();
  }
}
