package io.registrycache.testsupport;

import static org.assertj.core.api.Assertions.assertThat;

import org.junit.jupiter.api.Test;

/** The skip message of a missing Go tool says how to install it. */
class GoToolsTest {

  @Test
  void theToolsCiPinsAreInstalledWithGoToolsSh() {
    for (String tool : new String[] {"crane", "oras", "cosign", "helm"}) {
      assertThat(GoTools.howToInstall(tool))
          .isEqualTo("bash .ci/go-tools.sh " + tool + " installs the pinned version");
    }
    assertThat(GoTools.howToInstall("go")).contains("/usr/local/go/bin");
  }
}
