package io.registrycache.htpasswd;

import static org.assertj.core.api.Assertions.assertThat;

import io.registrycache.auth.Htpasswd;
import java.io.ByteArrayInputStream;
import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import org.junit.jupiter.api.Test;
import org.springframework.security.crypto.bcrypt.BCrypt;

/**
 * {@code java -jar registry-cache.jar htpasswd}: one htpasswd line the service's own htpasswd
 * reader accepts, with a bcrypt hash of exactly the password given; passwords bcrypt would cut
 * (over 72 bytes) and wrong options exit 2 with one line.
 */
class HtpasswdCommandTest {

  private final ByteArrayOutputStream out = new ByteArrayOutputStream();
  private final ByteArrayOutputStream err = new ByteArrayOutputStream();

  private int run(String stdin, String... args) {
    return HtpasswdCommand.run(
        args,
        new ByteArrayInputStream(stdin.getBytes(StandardCharsets.UTF_8)),
        new PrintStream(out, true, StandardCharsets.UTF_8),
        new PrintStream(err, true, StandardCharsets.UTF_8),
        null);
  }

  private String out() {
    return out.toString(StandardCharsets.UTF_8);
  }

  private String err() {
    return err.toString(StandardCharsets.UTF_8);
  }

  @Test
  void writesALineTheServiceReadsWithAHashOfThePassword() {
    int status =
        run(
            "s3cret wörd\nignored second line\n",
            "--user",
            "alice",
            "--password-stdin",
            "--cost",
            "4");

    assertThat(status).isZero();
    assertThat(err()).isEmpty();
    assertThat(out()).matches("alice:\\$2y\\$04\\$[./A-Za-z0-9]{53}\n");
    String hash = Htpasswd.parse(out()).hashes().get("alice");
    assertThat(BCrypt.checkpw("s3cret wörd", hash)).isTrue();
    assertThat(BCrypt.checkpw("s3cret wörd\n", hash)).isFalse();
    assertThat(BCrypt.checkpw("s3cret wör", hash)).isFalse();
  }

  @Test
  void aCrlfLineAndAPasswordWithoutLineBreakAreReadAsTyped() {
    assertThat(run("pw\r\n", "--user", "bob", "--password-stdin", "--cost", "4")).isZero();
    assertThat(BCrypt.checkpw("pw", Htpasswd.parse(out()).hashes().get("bob"))).isTrue();
    out.reset();
    assertThat(run("pw", "--user", "carol", "--password-stdin", "--cost", "4")).isZero();
    assertThat(BCrypt.checkpw("pw", Htpasswd.parse(out()).hashes().get("carol"))).isTrue();
  }

  @Test
  void theDefaultCostIsTen() {
    assertThat(run("pw\n", "--user", "alice", "--password-stdin")).isZero();
    assertThat(out()).startsWith("alice:$2y$10$");
  }

  @Test
  void seventyTwoBytesPassAndSeventyThreeAreRefused() {
    assertThat(run("a".repeat(72) + "\n", "--user", "alice", "--password-stdin", "--cost", "4"))
        .isZero();
    out.reset();

    // 36 two-byte characters and one more byte: 73 bytes, 37 characters
    int status = run("é".repeat(36) + "x\n", "--user", "alice", "--password-stdin", "--cost", "4");

    assertThat(status).isEqualTo(2);
    assertThat(out()).isEmpty();
    assertThat(err())
        .isEqualTo(
            "htpasswd: the password is 73 bytes long (UTF-8); bcrypt uses at most 72: choose a shorter one\n");
  }

  @Test
  void wrongInputExitsTwoWithOneLine() {
    assertThat(run("\n", "--user", "alice", "--password-stdin")).isEqualTo(2);
    assertThat(err()).isEqualTo("htpasswd: the password is empty\n");
    err.reset();
    assertThat(run("pw\n", "--user", "al:ice", "--password-stdin")).isEqualTo(2);
    assertThat(err())
        .startsWith("htpasswd: the user name must not")
        .doesNotContain("\n\n")
        .hasLineCount(1);
    err.reset();
    assertThat(run("pw\n", "--user", "alice", "--password-stdin", "--cost", "3")).isEqualTo(2);
    assertThat(err()).isEqualTo("htpasswd: --cost must be 4 to 31, not 3\n");
    err.reset();
    assertThat(run("pw\n", "--password-stdin")).isEqualTo(2);
    assertThat(err())
        .startsWith("htpasswd: Missing required option: '--user=<name>'")
        .hasLineCount(1);
    err.reset();
    assertThat(run("pw\n", "--user", "alice"))
        .as("no terminal and no --password-stdin")
        .isEqualTo(2);
    assertThat(err())
        .isEqualTo("htpasswd: no terminal to ask for the password on: give --password-stdin\n");
    assertThat(out()).isEmpty();
  }
}
