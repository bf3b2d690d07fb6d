package io.registrycache.auth;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.github.bucket4j.TimeMeter;
import io.registrycache.config.RegistryCacheProperties;
import io.registrycache.oci.OciErrorCode;
import io.registrycache.oci.OciException;
import io.registrycache.testsupport.TestFiles;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.Base64;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.atomic.AtomicLong;
import org.junit.jupiter.api.Test;
import org.springframework.security.crypto.bcrypt.BCryptPasswordEncoder;

/**
 * Failed Basic checks per client address ({@code registry-cache.rate-limit.failed-checks}), through
 * {@link PullAuthentication}, on a clock moved by hand.
 */
class FailedChecksTest {

  final AtomicLong now = new AtomicLong();
  final TimeMeter clock =
      new TimeMeter() {
        @Override
        public long currentTimeNanos() {
          return now.get();
        }

        @Override
        public boolean isWallClockBased() {
          return false;
        }
      };

  private static List<String> basic(String user, String password) {
    return List.of(
        "Basic "
            + Base64.getEncoder()
                .encodeToString((user + ":" + password).getBytes(StandardCharsets.UTF_8)));
  }

  private PullAuthentication authentication(String... keyValues) throws Exception {
    Path dir = TestFiles.tempDirectory("failed-checks-");
    Path htpasswd =
        Files.writeString(
            dir.resolve("htpasswd"),
            HtpasswdTest.ALICE + "\nbob:" + new BCryptPasswordEncoder(4).encode("hunter2") + "\n");
    Map<String, String> properties =
        new HashMap<>(
            Map.of(
                "registry-cache.auth.enabled",
                "true",
                "registry-cache.auth.htpasswd-file",
                htpasswd.toString()));
    for (int i = 0; i < keyValues.length; i += 2) {
      properties.put(keyValues[i], keyValues[i + 1]);
    }
    RegistryCacheProperties settings = RegistryCacheProperties.bind(properties);
    return new PullAuthentication(settings, new TokenService(settings), clock);
  }

  private static void wrong(PullAuthentication auth, String client) {
    assertThatThrownBy(() -> auth.authenticate(basic("alice", "wrong"), null, client).block())
        .isInstanceOf(AuthenticationRequired.class);
  }

  private static void tooMany(
      PullAuthentication auth, List<String> header, String client, Duration retryAfter) {
    assertThatThrownBy(() -> auth.authenticate(header, null, client).block())
        .isInstanceOfSatisfying(
            OciException.class,
            e -> {
              assertThat(e).isNotInstanceOf(AuthenticationRequired.class);
              assertThat(e.code()).isEqualTo(OciErrorCode.TOOMANYREQUESTS);
              assertThat(e.status().value()).isEqualTo(429);
              assertThat(e.retryAfter()).hasValue(retryAfter);
              assertThat(e.getMessage())
                  .contains("too many failed credential checks")
                  .doesNotContain("alice");
            });
  }

  @Test
  void anAddressOverItsFailuresIsRefusedBeforeAnyCheckAndOthersAreNot() throws Exception {
    PullAuthentication auth =
        authentication(
            "registry-cache.rate-limit.enabled", "true",
            "registry-cache.rate-limit.failed-checks.per-minute", "6",
            "registry-cache.rate-limit.failed-checks.burst", "3");
    assertThat(auth.authenticate(basic("alice", "s3cret"), null, "10.0.0.1").block().name())
        .isEqualTo("alice");
    for (int i = 0; i < 3; i++) {
      wrong(auth, "10.0.0.1");
    }
    // one failure comes back every 10 s
    tooMany(auth, basic("alice", "wrong"), "10.0.0.1", Duration.ofSeconds(10));
    // right credentials not remembered are not even checked while the address is out of tries...
    tooMany(auth, basic("bob", "hunter2"), "10.0.0.1", Duration.ofSeconds(10));
    // ...remembered ones cost no bcrypt and pass; anonymous needs no check
    assertThat(auth.authenticate(basic("alice", "s3cret"), null, "10.0.0.1").block().name())
        .isEqualTo("alice");
    assertThat(auth.authenticate(List.of(), null, "10.0.0.1").block())
        .isEqualTo(Identity.ANONYMOUS);
    // another address has its own tries
    wrong(auth, "10.0.0.2");
    assertThat(auth.authenticate(basic("bob", "hunter2"), null, "10.0.0.2").block().name())
        .isEqualTo("bob");

    now.addAndGet(Duration.ofSeconds(9).toNanos());
    tooMany(auth, basic("alice", "wrong"), "10.0.0.1", Duration.ofSeconds(1));
    now.addAndGet(Duration.ofSeconds(1).toNanos());
    wrong(auth, "10.0.0.1");
    tooMany(auth, basic("alice", "wrong"), "10.0.0.1", Duration.ofSeconds(10));
  }

  @Test
  void aCheckThatSucceedsGivesItsTryBack() throws Exception {
    PullAuthentication auth =
        authentication(
            "registry-cache.rate-limit.enabled", "true",
            "registry-cache.rate-limit.failed-checks.per-minute", "1",
            "registry-cache.rate-limit.failed-checks.burst", "2");
    wrong(auth, "10.0.0.1");
    assertThat(auth.authenticate(basic("bob", "hunter2"), null, "10.0.0.1").block().name())
        .isEqualTo("bob");
    wrong(auth, "10.0.0.1");
    tooMany(auth, basic("alice", "wrong"), "10.0.0.1", Duration.ofSeconds(60));
  }

  @Test
  void theTokenEndpointsPasswordGrantCountsToo() throws Exception {
    PullAuthentication auth =
        authentication(
            "registry-cache.rate-limit.enabled", "true",
            "registry-cache.rate-limit.failed-checks.per-minute", "1",
            "registry-cache.rate-limit.failed-checks.burst", "1");
    assertThatThrownBy(() -> auth.authenticate("alice", "wrong", "10.0.0.1").block())
        .isInstanceOf(AuthenticationRequired.class);
    assertThatThrownBy(() -> auth.authenticate("alice", "s3cret", "10.0.0.1").block())
        .isInstanceOfSatisfying(
            OciException.class, e -> assertThat(e.code()).isEqualTo(OciErrorCode.TOOMANYREQUESTS));
  }

  @Test
  void noLimitUnlessRateLimitsAreOnOrWithPerMinuteZero() throws Exception {
    for (PullAuthentication auth :
        List.of(
            authentication(),
            authentication(
                "registry-cache.rate-limit.enabled",
                "true",
                "registry-cache.rate-limit.failed-checks.per-minute",
                "0"))) {
      for (int i = 0; i < 20; i++) {
        wrong(auth, "10.0.0.1");
      }
    }
  }
}
