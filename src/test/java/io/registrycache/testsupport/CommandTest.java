package io.registrycache.testsupport;

import static org.assertj.core.api.Assertions.assertThatCode;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import java.io.IOException;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import org.assertj.core.api.Assertions;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
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
  void runsInTheGivenDirectoryWithTheGivenEnvironment(@TempDir Path dir) throws IOException {
    Command.Result result =
        Command.run(
            Duration.ofSeconds(30),
            dir,
            Map.of("COMMAND_TEST_VALUE", "forty-two"),
            List.of("sh", "-c", "pwd; echo \"$COMMAND_TEST_VALUE\""));
    Assertions.assertThat(result.assertSuccess().output())
        .isEqualTo(dir.toRealPath() + "\nforty-two\n");
  }

  @Test
  void aToolThatIsThereNeitherFailsNorSkips() {
    assertThatCode(() -> Command.requireTool(true, "unused", "true")).doesNotThrowAnyException();
  }
}
