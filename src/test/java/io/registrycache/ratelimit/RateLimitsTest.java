package io.registrycache.ratelimit;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.github.bucket4j.TimeMeter;
import io.micrometer.core.instrument.Counter;
import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import io.registrycache.auth.Identity;
import io.registrycache.config.RegistryCacheProperties;
import io.registrycache.oci.OciErrorCode;
import io.registrycache.oci.OciException;
import io.registrycache.proxy.FillPermits;
import java.time.Duration;
import java.util.HashMap;
import java.util.Map;
import java.util.concurrent.atomic.AtomicLong;
import org.junit.jupiter.api.Test;

/** The per-identity limits on a clock moved by hand: no waiting for time to pass. */
class RateLimitsTest {

  static final Identity ALICE = new Identity(Identity.Kind.USER, "alice");
  static final Identity BOB = new Identity(Identity.Kind.USER, "bob");
  static final Identity CI = new Identity(Identity.Kind.ROBOT, "ci");

  /** Nanoseconds, moved by the test. */
  final AtomicLong now = new AtomicLong(1_000_000_000L);

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
  final SimpleMeterRegistry meters = new SimpleMeterRegistry();

  RateLimits limits(String... keyValues) {
    Map<String, String> properties = new HashMap<>();
    properties.put("registry-cache.rate-limit.enabled", "true");
    for (int i = 0; i < keyValues.length; i += 2) {
      properties.put("registry-cache.rate-limit." + keyValues[i], keyValues[i + 1]);
    }
    return new RateLimits(RegistryCacheProperties.bind(properties).rateLimit(), meters, clock);
  }

  double refused(String identity, String limit) {
    Counter c =
        meters
            .find("registry.cache.rate.limited")
            .tags("identity", identity, "limit", limit)
            .counter();
    return c == null ? 0 : c.count();
  }

  @Test
  void offByDefaultWithDocumentedDefaultsWhenOn() {
    assertThat(
            new RateLimits(RegistryCacheProperties.defaults().rateLimit(), meters, clock).enabled())
        .isFalse();
    var settings =
        RegistryCacheProperties.bind(Map.of("registry-cache.rate-limit.enabled", "true"))
            .rateLimit();
    assertThat(settings.authenticated())
        .extracting("requestsPerSecond", "burst", "concurrentFills")
        .containsExactly(50, 200, 8);
    assertThat(settings.anonymous())
        .extracting("requestsPerSecond", "burst", "concurrentFills")
        .containsExactly(20, 100, 4);
    assertThat(settings.failedChecks()).extracting("perMinute", "burst").containsExactly(10, 10);
    var rateOnly =
        RegistryCacheProperties.bind(
                Map.of("registry-cache.rate-limit.authenticated.requests-per-second", "7"))
            .rateLimit()
            .authenticated();
    assertThat(rateOnly.burst()).as("burst follows a rate set alone").isEqualTo(7);
    assertThat(rateOnly.concurrentFills()).isEqualTo(8);
    assertThatThrownBy(
            () ->
                RegistryCacheProperties.bind(
                    Map.of(
                        "registry-cache.rate-limit.authenticated.requests-per-second", "10",
                        "registry-cache.rate-limit.authenticated.burst", "5")))
        .hasStackTraceContaining("burst (5) must be at least requests-per-second (10)");
  }

  @Test
  void anIdentityOverItsRateIsRefusedWithRetryAfterWhileAnotherIsServed() {
    RateLimits limits =
        limits("authenticated.requests-per-second", "2", "authenticated.burst", "3");
    for (int i = 0; i < 3; i++) {
      limits.admit(ALICE, "10.0.0.1");
    }
    assertThatThrownBy(() -> limits.admit(ALICE, "10.0.0.1"))
        .isInstanceOfSatisfying(
            RateLimited.class,
            e -> {
              assertThat(e.code()).isEqualTo(OciErrorCode.TOOMANYREQUESTS);
              assertThat(e.status().value()).isEqualTo(429);
              assertThat(e.limit()).isEqualTo(RateLimited.Limit.REQUESTS);
              // one token comes back every 500 ms: Retry-After rounds up to whole seconds
              assertThat(e.retryAfter()).hasValue(Duration.ofSeconds(1));
              assertThat(e.getMessage())
                  .contains("user:alice")
                  .contains("2 requests per second")
                  .doesNotContain("10.0.0.1");
            });
    assertThat(refused("user", "requests")).isEqualTo(1);
    limits.admit(BOB, "10.0.0.1"); // another identity, same address: its own bucket
    limits.admit(CI, "10.0.0.1");

    now.addAndGet(Duration.ofMillis(499).toNanos());
    assertThatThrownBy(() -> limits.admit(ALICE, "10.0.0.2")).isInstanceOf(RateLimited.class);
    now.addAndGet(Duration.ofMillis(1).toNanos());
    limits.admit(ALICE, "10.0.0.2"); // the token that came back, from any address
    assertThatThrownBy(() -> limits.admit(ALICE, "10.0.0.2")).isInstanceOf(RateLimited.class);
    assertThat(refused("user", "requests")).isEqualTo(3);
  }

  @Test
  void retryAfterSaysWhenATokenComesBack() {
    RateLimits limits =
        limits("authenticated.requests-per-second", "1", "authenticated.burst", "1");
    limits.admit(CI, null);
    now.addAndGet(Duration.ofMillis(100).toNanos());
    assertThatThrownBy(() -> limits.admit(CI, null))
        .isInstanceOfSatisfying(
            RateLimited.class, e -> assertThat(e.retryAfter()).hasValue(Duration.ofSeconds(1)));
    assertThat(refused("robot:ci", "requests"))
        .as("a robot is counted under its own name")
        .isEqualTo(1);
    assertThat(RateLimited.wholeSeconds(Duration.ofMillis(2001))).isEqualTo(Duration.ofSeconds(3));
    assertThat(RateLimited.wholeSeconds(Duration.ZERO)).isEqualTo(Duration.ofSeconds(1));
  }

  @Test
  void anonymousLimitsArePerClientAddress() {
    RateLimits limits = limits("anonymous.requests-per-second", "1", "anonymous.burst", "2");
    limits.admit(Identity.ANONYMOUS, "10.0.0.1");
    limits.admit(Identity.ANONYMOUS, "10.0.0.1");
    assertThatThrownBy(() -> limits.admit(Identity.ANONYMOUS, "10.0.0.1"))
        .isInstanceOf(RateLimited.class)
        .hasMessageContaining("anonymous from this address");
    limits.admit(Identity.ANONYMOUS, "10.0.0.2");
    limits.admit(Identity.ANONYMOUS, "2001:db8::1");
    assertThat(refused("anonymous", "requests")).isEqualTo(1);
    // the authenticated limits are not the anonymous ones (defaults: 50/s, burst 200)
    for (int i = 0; i < 10; i++) {
      limits.admit(ALICE, "10.0.0.1");
    }
  }

  /**
   * Credential pass-through: the name of a pass-through identity is unchecked, so its bucket is per
   * address.
   */
  @Test
  void passthroughIdentitiesAreLimitedPerClientAddressNotPerName() {
    RateLimits limits =
        limits("authenticated.requests-per-second", "1", "authenticated.burst", "2");
    limits.admit(new Identity(Identity.Kind.PASSTHROUGH, "dana"), "10.0.0.1");
    limits.admit(new Identity(Identity.Kind.PASSTHROUGH, "erin"), "10.0.0.1");
    assertThatThrownBy(
            () -> limits.admit(new Identity(Identity.Kind.PASSTHROUGH, "a-new-name"), "10.0.0.1"))
        .isInstanceOf(RateLimited.class);
    limits.admit(new Identity(Identity.Kind.PASSTHROUGH, "dana"), "10.0.0.2");
    limits.admit(ALICE, "10.0.0.1"); // a user of the cache keeps a bucket of its own
    assertThat(refused("passthrough", "requests")).isEqualTo(1);
  }

  @Test
  void zeroMeansUnlimited() {
    RateLimits limits =
        limits("authenticated.requests-per-second", "0", "authenticated.concurrent-fills", "0");
    FillPermits permits = null;
    for (int i = 0; i < 10_000; i++) {
      permits = limits.admit(ALICE, null);
    }
    for (int i = 0; i < 1_000; i++) {
      assertThat(permits.tryAcquire()).isTrue();
    }
  }

  @Test
  void concurrentFillsArePerIdentityAndComeBackWhenAFillEnds() {
    RateLimits limits = limits("authenticated.concurrent-fills", "2");
    FillPermits alice = limits.admit(ALICE, null);
    assertThat(alice.tryAcquire()).isTrue();
    assertThat(limits.admit(ALICE, null).tryAcquire())
        .as("another request of the same identity")
        .isTrue();
    FillPermits third = limits.admit(ALICE, null);
    assertThat(third.tryAcquire()).isFalse();
    OciException refusal = third.refused();
    assertThat(refusal)
        .isInstanceOfSatisfying(
            RateLimited.class,
            e -> {
              assertThat(e.limit()).isEqualTo(RateLimited.Limit.FILLS);
              assertThat(e.code()).isEqualTo(OciErrorCode.TOOMANYREQUESTS);
              assertThat(e.retryAfter()).hasValue(RateLimits.FILL_RETRY_AFTER);
              assertThat(e.getMessage()).contains("user:alice").contains("2 upstream fills");
            });
    assertThat(refused("user", "fills")).isEqualTo(1);

    FillPermits bob = limits.admit(BOB, null);
    assertThat(bob.tryAcquire()).as("bob's fills are his own").isTrue();

    alice.release();
    assertThat(third.tryAcquire()).as("one of alice's fills ended").isTrue();
    assertThat(limits.admit(ALICE, null).tryAcquire()).isFalse();
  }
}
