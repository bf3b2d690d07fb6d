package io.registrycache.auth;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import ch.qos.logback.classic.Level;
import ch.qos.logback.classic.Logger;
import ch.qos.logback.classic.spi.ILoggingEvent;
import ch.qos.logback.core.read.ListAppender;
import io.registrycache.config.RegistryCacheProperties;
import io.registrycache.oci.OciErrorCode;
import io.registrycache.oci.OciException;
import io.registrycache.oci.RepositoryName;
import io.registrycache.testsupport.TestUpstreams;
import io.registrycache.upstream.Upstream;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import org.junit.jupiter.api.Test;
import org.slf4j.LoggerFactory;
import reactor.core.publisher.Mono;

/** The one decision ({@link PullAccess}): rules, groups, kinds of identity, pull-through lists. */
class PullAccessTest {

  static final Identity ALICE = new Identity(Identity.Kind.USER, "alice");
  static final Identity BOB = new Identity(Identity.Kind.USER, "bob");
  static final Identity CI = new Identity(Identity.Kind.ROBOT, "ci");
  static final Identity ALICE_ROBOT = new Identity(Identity.Kind.ROBOT, "alice");
  static final Identity ISSUER_ALICE = Identity.external("idp", "alice", Set.of());
  static final Identity ISSUER_CI = Identity.external("idp", "ci", Set.of());
  static final Identity ISSUER_BOB = Identity.external("idp", "bob", Set.of());

  static final Upstream LOCAL = TestUpstreams.upstream("local", "http://local.invalid", s -> {});
  static final Upstream HUB = TestUpstreams.upstream("hub", "http://hub.invalid", s -> {});
  static final Upstream OTHER = TestUpstreams.upstream("other", "http://other.invalid", s -> {});
  static final Upstream ELSEWHERE =
      TestUpstreams.upstream("elsewhere", "http://elsewhere.invalid", s -> {});

  static final Map<String, String> SETTINGS =
      Map.ofEntries(
          Map.entry("registry-cache.auth.enabled", "true"),
          Map.entry("registry-cache.auth.groups.devs", "user:bob,robot:ci"),
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
          Map.entry("registry-cache.auth.rules[3].repositories", "**"),
          Map.entry("registry-cache.auth.rules[4].subjects", "jwt:idp/dave,group:jwt:idp/ops"),
          Map.entry("registry-cache.auth.rules[4].upstreams", "local"),
          Map.entry("registry-cache.auth.rules[4].repositories", "ops/*"));

  static PullAccess access(Map<String, String> settings) {
    RegistryCacheProperties properties = RegistryCacheProperties.bind(settings);
    return new PullAccess(properties, new PullAuthentication(properties), null);
  }

  private final PullAccess access = access(SETTINGS);

  private boolean allows(
      PullAccess access, Identity identity, Upstream upstream, String repository) {
    return access.grants(identity, upstream, RepositoryName.parse(repository));
  }

  private boolean allows(Identity identity, Upstream upstream, String repository) {
    return allows(access, identity, upstream, repository);
  }

  @Test
  void namesOfDifferentKindsNeverMatchOneAnother() {
    assertThat(allows(ALICE, LOCAL, "team/app")).isTrue();
    assertThat(allows(ALICE_ROBOT, LOCAL, "team/app"))
        .as("robot:alice is not user:alice")
        .isFalse();
    assertThat(allows(ISSUER_ALICE, LOCAL, "team/app"))
        .as("jwt:idp/alice is not user:alice")
        .isFalse();
    assertThat(allows(CI, LOCAL, "dev/app")).as("robot:ci in group devs").isTrue();
    assertThat(allows(ISSUER_CI, LOCAL, "dev/app"))
        .as("jwt:idp/ci is not the group's robot:ci")
        .isFalse();
    assertThat(allows(ISSUER_BOB, LOCAL, "dev/app"))
        .as("jwt:idp/bob is not the group's user:bob")
        .isFalse();
    assertThat(allows(new Identity(Identity.Kind.USER, "ci"), LOCAL, "dev/app"))
        .as("user:ci is not robot:ci")
        .isFalse();
  }

  @Test
  void anIssuersSubjectsAndGroupsAreNamedWithTheIssuer() {
    assertThat(allows(Identity.external("idp", "dave", Set.of()), LOCAL, "ops/app"))
        .as("jwt:idp/dave")
        .isTrue();
    assertThat(allows(Identity.external("other-idp", "dave", Set.of()), LOCAL, "ops/app"))
        .as("another issuer's dave")
        .isFalse();
    assertThat(allows(Identity.external("idp", "erin", Set.of("ops")), LOCAL, "ops/app"))
        .as("group:jwt:idp/ops")
        .isTrue();
    assertThat(allows(Identity.external("other-idp", "erin", Set.of("ops")), LOCAL, "ops/app"))
        .as("another issuer's group ops")
        .isFalse();
    assertThat(allows(Identity.external("idp", "erin", Set.of("devs")), LOCAL, "dev/app"))
        .as("a groups claim naming an operator's group does not put the subject in it")
        .isFalse();
    assertThat(allows(Identity.external("idp", "erin", Set.of()), HUB, "x/y"))
        .as("authenticated")
        .isTrue();
  }

  @Test
  void theLegacySettingKeepsTheOldMeaningOfNames() {
    Map<String, String> legacy = new HashMap<>(SETTINGS);
    legacy.put("registry-cache.auth.legacy-identity-names", "true");
    legacy.put("registry-cache.auth.groups.devs", "bob,robot:ci");
    PullAccess old = access(legacy);
    assertThat(allows(old, ISSUER_ALICE, LOCAL, "team/app"))
        .as("user:alice matched sub alice")
        .isTrue();
    assertThat(allows(old, ALICE_ROBOT, LOCAL, "team/app"))
        .as("robots stayed apart from users")
        .isFalse();
    assertThat(allows(old, ISSUER_BOB, LOCAL, "dev/app"))
        .as("a bare group member matched any kind")
        .isTrue();
    assertThat(allows(old, BOB, LOCAL, "dev/app")).isTrue();
    assertThat(allows(old, Identity.external("idp", "erin", Set.of("devs")), LOCAL, "dev/app"))
        .as("group:devs took the groups claim")
        .isTrue();
  }

  @Test
  void theLegacySettingWarnsAtStart() {
    Logger logger = (Logger) LoggerFactory.getLogger(PullAccess.class);
    ListAppender<ILoggingEvent> logged = new ListAppender<>();
    logged.start();
    logger.addAppender(logged);
    try {
      access(SETTINGS);
      assertThat(logged.list).as("off: no warning").isEmpty();
      Map<String, String> legacy = new HashMap<>(SETTINGS);
      legacy.put("registry-cache.auth.legacy-identity-names", "true");
      access(legacy);
    } finally {
      logger.detachAppender(logged);
    }
    assertThat(logged.list)
        .singleElement()
        .satisfies(
            e -> {
              assertThat(e.getLevel()).isEqualTo(Level.WARN);
              assertThat(e.getFormattedMessage())
                  .contains("legacy-identity-names")
                  .contains("next release");
            });
  }

  @Test
  void bareGroupMembersStopStartUpWithoutTheLegacySetting() {
    Map<String, String> bare = new HashMap<>(SETTINGS);
    bare.put("registry-cache.auth.groups.devs", "bob,robot:ci");
    assertThatThrownBy(() -> RegistryCacheProperties.bind(bare))
        .hasStackTraceContaining("member 'bob' must name its kind")
        .hasStackTraceContaining("legacy-identity-names");
  }

  @Test
  void userRuleByUpstreamAndPattern() {
    assertThat(allows(ALICE, LOCAL, "team/a/b")).isTrue();
    assertThat(allows(ALICE, OTHER, "team/app")).as("another upstream").isFalse();
    assertThat(allows(ALICE, LOCAL, "secret/app")).isFalse();
    assertThat(allows(BOB, LOCAL, "team/app")).isFalse();
  }

  @Test
  void groupRulesCoverTheirMembersAndDefaultToEveryUpstream() {
    assertThat(allows(BOB, LOCAL, "dev/app")).isTrue();
    assertThat(allows(CI, ELSEWHERE, "dev/app")).isTrue();
    assertThat(allows(CI, LOCAL, "dev/app/x")).isFalse();
    assertThat(allows(ALICE, LOCAL, "dev/app")).isFalse();
  }

  @Test
  void anonymousAndAuthenticated() {
    assertThat(allows(Identity.ANONYMOUS, HUB, "library/alpine")).isTrue();
    assertThat(allows(Identity.ANONYMOUS, HUB, "team/app")).isFalse();
    assertThat(allows(Identity.ANONYMOUS, LOCAL, "library/alpine")).isFalse();
    assertThat(allows(ALICE, HUB, "team/app")).isTrue();
    assertThat(allows(CI, HUB, "x/y/z")).isTrue();
  }

  @Test
  void denyByDefault() {
    PullAccess none = access(Map.of("registry-cache.auth.enabled", "true"));
    assertThat(allows(none, ALICE, LOCAL, "team/app")).isFalse();
    assertThat(allows(none, Identity.ANONYMOUS, LOCAL, "team/app")).isFalse();
  }

  private <T> T decided(
      PullAccess access,
      Identity identity,
      String requested,
      Upstream upstream,
      String repository) {
    @SuppressWarnings("unchecked")
    T served =
        (T)
            access
                .decide(
                    identity,
                    requested,
                    upstream,
                    RepositoryName.parse(repository),
                    () -> null,
                    List.of(),
                    null,
                    u -> Mono.just(u))
                .block();
    return served;
  }

  @Test
  void theDecisionAnswers401ForAnonymous403ForAKnownIdentityAndServesWithTheCachesCredentials() {
    Upstream served = decided(access, ALICE, "team/app", LOCAL, "team/app");
    assertThat(served)
        .as("an upstream of the cache's own credentials: asked as it is")
        .isSameAs(LOCAL);
    assertThatThrownBy(() -> decided(access, Identity.ANONYMOUS, "team/app", LOCAL, "team/app"))
        .isInstanceOfSatisfying(
            AuthenticationRequired.class,
            e -> {
              assertThat(e.code()).isEqualTo(OciErrorCode.UNAUTHORIZED);
              assertThat(e.status().value()).isEqualTo(401);
              assertThat(e.challenge())
                  .isEqualTo("Basic realm=\"registry-cache\", charset=\"UTF-8\"");
            });
    assertThatThrownBy(() -> decided(access, ALICE, "secret/app", LOCAL, "secret/app"))
        .isInstanceOfSatisfying(
            OciException.class,
            e -> {
              assertThat(e).isNotInstanceOf(AuthenticationRequired.class);
              assertThat(e.code()).isEqualTo(OciErrorCode.DENIED);
              assertThat(e.status().value()).isEqualTo(403);
            });
  }

  @Test
  void aTokenMustGrantTheRepositoryAsTheRequestNamesIt() {
    Identity token = new Identity(Identity.Kind.USER, "alice", Set.of("team/app"));
    assertThat((Upstream) decided(access, token, "team/app", LOCAL, "team/app")).isSameAs(LOCAL);
    assertThatThrownBy(() -> decided(access, token, "team/other", LOCAL, "team/other"))
        .isInstanceOf(AuthenticationRequired.class)
        .hasMessageContaining("does not grant pull of 'team/other'");
  }

  @Test
  void thePullThroughListsAre404AfterTheRulesAuthOnOrOff() {
    Upstream listed =
        TestUpstreams.upstream(
            "local", "http://local.invalid", s -> s.put("pull-through.allow", "team/app"));
    assertThat((Upstream) decided(access, ALICE, "team/app", listed, "team/app")).isSameAs(listed);
    assertThatThrownBy(() -> decided(access, ALICE, "team/other", listed, "team/other"))
        .isInstanceOfSatisfying(
            OciException.class, e -> assertThat(e.code()).isEqualTo(OciErrorCode.NAME_UNKNOWN));
    assertThatThrownBy(() -> decided(access, BOB, "team/other", listed, "team/other"))
        .as("the rules first: who may not pull learns nothing of the lists")
        .isInstanceOfSatisfying(
            OciException.class, e -> assertThat(e.code()).isEqualTo(OciErrorCode.DENIED));
    PullAccess off = access(Map.of());
    assertThatThrownBy(() -> decided(off, Identity.ANONYMOUS, "team/other", listed, "team/other"))
        .isInstanceOfSatisfying(
            OciException.class, e -> assertThat(e.code()).isEqualTo(OciErrorCode.NAME_UNKNOWN));
    assertThat(allows(off, Identity.ANONYMOUS, listed, "team/other")).isFalse();
    assertThat(allows(off, Identity.ANONYMOUS, LOCAL, "anything")).as("auth off: anyone").isTrue();
  }

  @Test
  void badRulesFailBindingWithAClearMessage() {
    assertThatThrownBy(
            () ->
                RegistryCacheProperties.bind(
                    Map.of(
                        "registry-cache.auth.rules[0].subjects",
                        "alice",
                        "registry-cache.auth.rules[0].repositories",
                        "**")))
        .hasStackTraceContaining("user:<name>");
    assertThatThrownBy(
            () ->
                RegistryCacheProperties.bind(
                    Map.of(
                        "registry-cache.auth.rules[0].subjects",
                        "jwt:idp",
                        "registry-cache.auth.rules[0].repositories",
                        "**")))
        .hasStackTraceContaining("jwt:<issuer-key>/<subject>");
    assertThatThrownBy(
            () ->
                RegistryCacheProperties.bind(
                    Map.of("registry-cache.auth.rules[0].subjects", "user:alice")))
        .hasStackTraceContaining("at least one repository pattern");
    assertThatThrownBy(
            () ->
                RegistryCacheProperties.bind(
                    Map.of(
                        "registry-cache.auth.rules[0].subjects",
                        "user:alice",
                        "registry-cache.auth.rules[0].repositories",
                        "Team/**")))
        .hasStackTraceContaining("lowercase");
  }
}
