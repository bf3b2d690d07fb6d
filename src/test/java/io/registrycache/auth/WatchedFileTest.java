package io.registrycache.auth;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.registrycache.testsupport.TestFiles;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.FileTime;
import java.time.Instant;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;
import org.junit.jupiter.api.Test;

class WatchedFileTest {

  private final AtomicLong now = new AtomicLong(1_000_000_000L);
  private final AtomicInteger changes = new AtomicInteger();

  private static void write(Path file, String text, long secondsFromNow) throws Exception {
    Files.writeString(file, text);
    Files.setLastModifiedTime(file, FileTime.from(Instant.now().plusSeconds(secondsFromNow)));
  }

  @Test
  void readsAgainWhenTheFileChangesLookingAtMostOnceASecond() throws Exception {
    Path file = TestFiles.tempDirectory("watched-").resolve("robots");
    write(file, "ci:" + RobotTokensTest.TOKEN, 0);
    WatchedFile<RobotTokens> watched =
        new WatchedFile<>(
            file,
            "registry-cache.auth.tokens-file",
            RobotTokens::parse,
            now::get,
            changes::incrementAndGet);
    assertThat(watched.get().contains("ci")).isTrue();

    write(file, "build:" + RobotTokensTest.TOKEN, 10);
    now.addAndGet(500_000_000L);
    assertThat(watched.get().contains("ci")).as("within a second of the last look").isTrue();
    now.addAndGet(600_000_000L);
    assertThat(watched.get().contains("build")).as("a second later").isTrue();
    assertThat(changes).hasValue(1);
  }

  @Test
  void keepsThePreviousVersionWhenTheNewOneIsBroken() throws Exception {
    Path file = TestFiles.tempDirectory("watched-").resolve("robots");
    write(file, "ci:" + RobotTokensTest.TOKEN, 0);
    WatchedFile<RobotTokens> watched =
        new WatchedFile<>(
            file,
            "registry-cache.auth.tokens-file",
            RobotTokens::parse,
            now::get,
            changes::incrementAndGet);
    write(file, "ci:tooshort", 10);
    now.addAndGet(2_000_000_000L);
    assertThat(watched.get().verify("ci", RobotTokensTest.TOKEN)).isTrue();
    Files.delete(file);
    now.addAndGet(2_000_000_000L);
    assertThat(watched.get().verify("ci", RobotTokensTest.TOKEN)).isTrue();
    assertThat(changes).hasValue(0);
  }

  @Test
  void aBrokenOrMissingFileAtStartIsAnErrorNamingTheSetting() {
    Path missing = TestFiles.tempDirectory("watched-").resolve("absent");
    assertThatThrownBy(
            () ->
                new WatchedFile<>(
                    missing,
                    "registry-cache.auth.htpasswd-file",
                    Htpasswd::parse,
                    now::get,
                    () -> {}))
        .isInstanceOf(IllegalStateException.class)
        .hasMessageContaining("registry-cache.auth.htpasswd-file")
        .hasMessageContaining("absent");
  }
}
