package io.registrycache.auth;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.registrycache.config.AuthProperties;
import io.registrycache.config.RegistryCacheProperties;
import io.registrycache.oci.OciErrorCode;
import io.registrycache.oci.OciException;
import java.util.Map;
import org.junit.jupiter.api.Test;

class AccessRulesTest {

  static final Identity ALICE = new Identity(Identity.Kind.USER, "alice");
  static final Identity BOB = new Identity(Identity.Kind.USER, "bob");
  static final Identity CI = new Identity(Identity.Kind.ROBOT, "ci");
  static final Identity ALICE_ROBOT = new Identity(Identity.Kind.ROBOT, "alice");

  static final Map<String, String> SETTINGS = Map.ofEntries(
      Map.entry("registry-cache.auth.enabled", "true"),
      Map.entry("registry-cache.auth.groups.devs", "bob,ci"),
      Map.entry("registry-cache.auth.rules[0].subjects", "user:alice"),
      Map.entry("registry-cache.auth.rules[0].upstreams", "local"),
      Map.entry("registry-cache.auth.rules[0].repositories", "team/**"),
      Map.entry("registry-cache.auth.rules[1].subjects", "group:devs"),
      Map.entry("registry-cache.auth.rules[1].repositories", "dev/*"),
      Map.entry("registry-cache.auth.rules[2].subjects", "anonymous"),
      Map.entry("registry-cache.auth.rules[2].upstreams", "hub"),
      Map.entry("registry-cache.auth.rules[2].repositories", "library/*"),
      Map.entry("registry-cache.auth.rules[3].subjects", "authenticated"),
      Map.entry("registry-cache.auth.rules[3].upstreams", "hub"),
      Map.entry("registry-cache.auth.rules[3].repositories", "**"));

  private final AuthProperties auth = RegistryCacheProperties.bind(SETTINGS).auth();
  private final AccessRules rules = new AccessRules(auth.rules(), auth.groups());

  @Test
  void aTrustedIssuersUserFollowsTheSameRulesWithTheGroupsOfItsToken() {
    Identity external = Identity.external("https://idp.test", "alice", java.util.Set.of());
    assertThat(rules.allows(external, "local", "team/app")).as("user:alice").isTrue();
    assertThat(rules.allows(external, "local", "dev/app")).isFalse();
    Identity inDevs = Identity.external("https://idp.test", "dave", java.util.Set.of("devs"));
    assertThat(rules.allows(inDevs, "local", "dev/app")).as("group:devs from the token's groups claim").isTrue();
    assertThat(rules.allows(inDevs, "local", "team/app")).isFalse();
    Identity external_bob = Identity.external("https://idp.test", "bob", java.util.Set.of());
    assertThat(rules.allows(external_bob, "local", "dev/app")).as("group:devs from registry-cache.auth.groups").isTrue();
    assertThat(rules.allows(Identity.external("https://idp.test", "erin", java.util.Set.of("ops")), "local", "dev/app"))
        .isFalse();
  }

  @Test
  void userRuleByUpstreamAndPattern() {
    assertThat(rules.allows(ALICE, "local", "team/app")).isTrue();
    assertThat(rules.allows(ALICE, "local", "team/a/b")).isTrue();
    assertThat(rules.allows(ALICE, "other", "team/app")).as("another upstream").isFalse();
    assertThat(rules.allows(ALICE, "local", "secret/app")).isFalse();
    assertThat(rules.allows(ALICE_ROBOT, "local", "team/app")).as("a robot of the same name is not the user").isFalse();
    assertThat(rules.allows(BOB, "local", "team/app")).isFalse();
  }

  @Test
  void groupRulesCoverUsersAndRobotsAndDefaultToEveryUpstream() {
    assertThat(rules.allows(BOB, "local", "dev/app")).isTrue();
    assertThat(rules.allows(CI, "elsewhere", "dev/app")).isTrue();
    assertThat(rules.allows(CI, "local", "dev/app/x")).isFalse();
    assertThat(rules.allows(ALICE, "local", "dev/app")).isFalse();
  }

  @Test
  void anonymousAndAuthenticated() {
    assertThat(rules.allows(Identity.ANONYMOUS, "hub", "library/alpine")).isTrue();
    assertThat(rules.allows(Identity.ANONYMOUS, "hub", "team/app")).isFalse();
    assertThat(rules.allows(Identity.ANONYMOUS, "local", "library/alpine")).isFalse();
    assertThat(rules.allows(ALICE, "hub", "team/app")).isTrue();
    assertThat(rules.allows(CI, "hub", "x/y/z")).isTrue();
  }

  @Test
  void denyByDefault() {
    AccessRules none = new AccessRules(java.util.List.of(), Map.of());
    assertThat(none.allows(ALICE, "local", "team/app")).isFalse();
    assertThat(none.allows(Identity.ANONYMOUS, "local", "team/app")).isFalse();
  }

  @Test
  void authorizationAnswers401ForAnonymousAnd403ForAKnownIdentity() {
    PullAuthorization authorization =
        new PullAuthorization(RegistryCacheProperties.bind(SETTINGS), new PullAuthentication(RegistryCacheProperties.bind(SETTINGS)));
    authorization.check(ALICE, "local", "team/app");
    assertThatThrownBy(() -> authorization.check(Identity.ANONYMOUS, "local", "team/app"))
        .isInstanceOfSatisfying(AuthenticationRequired.class, e -> {
          assertThat(e.code()).isEqualTo(OciErrorCode.UNAUTHORIZED);
          assertThat(e.status().value()).isEqualTo(401);
          assertThat(e.challenge()).isEqualTo("Basic realm=\"registry-cache\", charset=\"UTF-8\"");
        });
    assertThatThrownBy(() -> authorization.check(ALICE, "local", "secret/app"))
        .isInstanceOfSatisfying(OciException.class, e -> {
          assertThat(e).isNotInstanceOf(AuthenticationRequired.class);
          assertThat(e.code()).isEqualTo(OciErrorCode.DENIED);
          assertThat(e.status().value()).isEqualTo(403);
        });
  }

  @Test
  void authorizationIsANoOpWhileAuthIsOff() {
    RegistryCacheProperties off = RegistryCacheProperties.defaults();
    new PullAuthorization(off, new PullAuthentication(off)).check(Identity.ANONYMOUS, "local", "anything");
  }

  @Test
  void badRulesFailBindingWithAClearMessage() {
    assertThatThrownBy(() -> RegistryCacheProperties.bind(Map.of(
        "registry-cache.auth.rules[0].subjects", "alice", "registry-cache.auth.rules[0].repositories", "**")))
        .hasStackTraceContaining("user:<name>");
    assertThatThrownBy(() -> RegistryCacheProperties.bind(Map.of(
        "registry-cache.auth.rules[0].subjects", "user:alice")))
        .hasStackTraceContaining("at least one repository pattern");
    assertThatThrownBy(() -> RegistryCacheProperties.bind(Map.of(
        "registry-cache.auth.rules[0].subjects", "user:alice", "registry-cache.auth.rules[0].repositories", "Team/**")))
        .hasStackTraceContaining("lowercase");
  }
}
