package io.registrycache.admin;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import java.util.List;
import org.junit.jupiter.api.Test;

class PreloadPlatformsTest {

  @Test
  void emptyOrAbsentMeansEveryPlatform() {
    assertThat(PreloadPlatforms.of(null).all()).isTrue();
    assertThat(PreloadPlatforms.of(List.of()).all()).isTrue();
    assertThat(PreloadPlatforms.ALL.matches("linux/s390x")).isTrue();
    assertThat(PreloadPlatforms.ALL.matches(null)).isTrue();
  }

  @Test
  void aPlatformTakesItsVariantsButNotOtherArchitectures() {
    PreloadPlatforms arm64 = PreloadPlatforms.of(List.of(" Linux/ARM64 "));
    assertThat(arm64.wanted()).containsExactly("linux/arm64");
    assertThat(arm64.matches("linux/arm64")).isTrue();
    assertThat(arm64.matches("linux/arm64/v8")).isTrue();
    assertThat(arm64.matches("linux/amd64")).isFalse();
    assertThat(arm64.matches("linux/arm64x")).isFalse();
    assertThat(arm64.matches("unknown/unknown")).isFalse();
    assertThat(arm64.matches(null)).isFalse();

    PreloadPlatforms v7 =
        PreloadPlatforms.of(List.of("linux/arm/v7", "linux/amd64", "linux/amd64"));
    assertThat(v7.wanted()).containsExactly("linux/arm/v7", "linux/amd64");
    assertThat(v7.matches("linux/arm/v7")).isTrue();
    assertThat(v7.matches("linux/arm/v6")).isFalse();
    assertThat(v7.matches("linux/arm")).isFalse();
  }

  @Test
  void malformedPlatformsAreRejected() {
    for (String bad : List.of("linux", "linux/", "/amd64", "linux/arm/v7/x", "")) {
      assertThatThrownBy(() -> PreloadPlatforms.of(List.of(bad)))
          .as(bad)
          .isInstanceOf(IllegalArgumentException.class)
          .hasMessageContaining("os/architecture");
    }
  }
}
