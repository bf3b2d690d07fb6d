package io.registrycache.startup;

import static org.assertj.core.api.Assertions.assertThat;

import io.registrycache.config.RegistryCacheProperties;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Map;
import java.util.stream.Stream;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * The start-up warm-up pulls its synthetic images through the pull-through code (real HTTP on
 * loopback, real file-system store) and leaves nothing behind under the cache's storage path.
 */
class StartupWarmUpTest {

  @TempDir Path root;

  @Test
  void pullsEveryImageColdAndWarmAndLeavesNothingInTheStoragePath() throws IOException {
    StartupWarmUp warmUp =
        new StartupWarmUp(
            RegistryCacheProperties.bind(
                Map.of(
                    "registry-cache.storage.path",
                    root.toString(),
                    "registry-cache.admin.warm-up-pulls",
                    "12")));

    assertThat(warmUp.run(12)).isEqualTo(12);

    try (Stream<Path> left = Files.walk(root)) {
      assertThat(left.filter(Files::isRegularFile).toList()).isEmpty();
    }
    assertThat(root.resolve("tmp")).isEmptyDirectory();
  }

  @Test
  void noPullsAtZero() throws IOException {
    StartupWarmUp warmUp =
        new StartupWarmUp(
            RegistryCacheProperties.bind(
                Map.of(
                    "registry-cache.storage.path",
                    root.toString(),
                    "registry-cache.admin.warm-up-pulls",
                    "0")));

    warmUp.start();

    assertThat(warmUp.isRunning()).isTrue();
    try (Stream<Path> left = Files.list(root)) {
      assertThat(left.toList()).isEmpty();
    }
  }
}
