package io.registrycache.auth;

import static org.assertj.core.api.Assertions.assertThat;

import ch.qos.logback.classic.Logger;
import ch.qos.logback.classic.spi.ILoggingEvent;
import ch.qos.logback.core.read.ListAppender;
import io.github.bucket4j.TimeMeter;
import io.registrycache.config.RegistryCacheProperties;
import io.registrycache.testsupport.TestFiles;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import org.junit.jupiter.api.Test;
import org.slf4j.LoggerFactory;
import org.springframework.security.crypto.bcrypt.BCrypt;
import org.springframework.security.crypto.bcrypt.BCryptPasswordEncoder;
import org.springframework.security.crypto.password.PasswordEncoder;

/**
 * Every failed Basic check does the same work, pinned by counting the password encoder's calls and
 * the bcrypt cost of each, never by timing: one bcrypt, at the highest cost of the htpasswd file
 * for everything that is not a known user (an unknown name, a robot with a wrong token), the user's
 * own for a known user; a password over 72 bytes never matches, at the same cost.
 */
class EqualWorkTest {

  /**
   * A password of exactly bcrypt's 72 bytes: its hash also matches any longer password that starts
   * with it.
   */
  static final String LONGEST = "c".repeat(72);

  /**
   * Counts {@code matches} calls and the cost of the hash each was given; checks with real bcrypt.
   */
  static final class CountingEncoder implements PasswordEncoder {
    final List<Integer> costs = new ArrayList<>();
    final List<String> passwords = new ArrayList<>();
    private final BCryptPasswordEncoder bcrypt = new BCryptPasswordEncoder();

    @Override
    public String encode(CharSequence raw) {
      throw new AssertionError("nothing is encoded while checking");
    }

    @Override
    public boolean matches(CharSequence raw, String hash) {
      costs.add(Htpasswd.cost(hash));
      passwords.add(raw.toString());
      return bcrypt.matches(raw, hash);
    }
  }

  private final CountingEncoder encoder = new CountingEncoder();

  private PullAuthentication authentication() throws Exception {
    Path dir = TestFiles.tempDirectory("equal-work-");
    Path htpasswd =
        Files.writeString(
            dir.resolve("htpasswd"),
            HtpasswdTest.ALICE
                + "\n"
                + "carol:"
                + BCrypt.hashpw(LONGEST, BCrypt.gensalt(6))
                + "\n");
    Path tokens = Files.writeString(dir.resolve("tokens"), "ci:" + RobotTokensTest.TOKEN + "\n");
    RegistryCacheProperties properties =
        RegistryCacheProperties.bind(
            Map.of(
                "registry-cache.auth.enabled", "true",
                "registry-cache.auth.htpasswd-file", htpasswd.toString(),
                "registry-cache.auth.tokens-file", tokens.toString()));
    return new PullAuthentication(
        properties, new TokenService(properties), TimeMeter.SYSTEM_NANOTIME, encoder);
  }

  private Optional<Identity> check(PullAuthentication auth, String user, String password) {
    encoder.costs.clear();
    encoder.passwords.clear();
    return auth.verify(new BasicCredentials(user, password));
  }

  @Test
  void anUnknownNameAndAWrongRobotTokenCostOneBcryptAtTheFilesHighestCost() throws Exception {
    PullAuthentication auth = authentication();
    assertThat(check(auth, "mallory", "a-guess")).isEmpty();
    assertThat(encoder.costs).as("unknown name").containsExactly(6);
    assertThat(check(auth, "ci", RobotTokensTest.TOKEN + "0")).isEmpty();
    assertThat(encoder.costs)
        .as("a robot's wrong token: the unknown name's path")
        .containsExactly(6);
    assertThat(check(auth, "ci", "short")).isEmpty();
    assertThat(encoder.costs).containsExactly(6);
  }

  @Test
  void aKnownUsersWrongPasswordCostsOneBcryptOfTheirHash() throws Exception {
    PullAuthentication auth = authentication();
    assertThat(check(auth, "alice", "S3cret")).isEmpty();
    assertThat(encoder.costs).containsExactly(4);
    assertThat(check(auth, "alice", "s3cret")).contains(new Identity(Identity.Kind.USER, "alice"));
    assertThat(encoder.costs).containsExactly(4);
    assertThat(check(auth, "ci", RobotTokensTest.TOKEN))
        .contains(new Identity(Identity.Kind.ROBOT, "ci"));
    assertThat(encoder.costs).as("a robot's right token needs no bcrypt").isEmpty();
  }

  @Test
  void passwordsOverBcrypts72BytesNeverMatchAndCostTheSame() throws Exception {
    PullAuthentication auth = authentication();
    assertThat(check(auth, "carol", LONGEST)).isPresent();
    Logger logger = (Logger) LoggerFactory.getLogger(PullAuthentication.class);
    ListAppender<ILoggingEvent> logged = new ListAppender<>();
    logged.start();
    logger.addAppender(logged);
    try {
      assertThat(check(auth, "carol", LONGEST + "anything"))
          .as("bcrypt would read only the first 72 bytes")
          .isEmpty();
      assertThat(encoder.costs).containsExactly(6);
      assertThat(encoder.passwords)
          .as("the long password is not what bcrypt is given")
          .doesNotContain(LONGEST + "anything");
      assertThat(check(auth, "carol", LONGEST + "again")).isEmpty();
      assertThat(check(auth, "alice", "é".repeat(37))).as("74 bytes in UTF-8").isEmpty();
      assertThat(encoder.costs).containsExactly(4);
      assertThat(check(auth, "mallory", LONGEST + "x")).isEmpty();
      assertThat(encoder.costs).containsExactly(6);
    } finally {
      logger.detachAppender(logged);
    }
    assertThat(logged.list)
        .filteredOn(e -> e.getFormattedMessage().contains("more than 72 bytes"))
        .extracting(ILoggingEvent::getFormattedMessage)
        .as("one warning per user, naming the user, never the password")
        .hasSize(2)
        .anySatisfy(m -> assertThat(m).contains("'carol'"))
        .allSatisfy(m -> assertThat(m).doesNotContain(LONGEST));
  }
}
