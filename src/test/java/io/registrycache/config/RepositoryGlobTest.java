package io.registrycache.config;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.registrycache.oci.OciException;
import io.registrycache.oci.RepositoryName;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;

class RepositoryGlobTest {

  private static boolean matches(String glob, String name) {
    return new RepositoryGlob(glob).matches(new RepositoryName(name).value());
  }

  @Test
  void oneStarStaysWithinOneComponent() {
    assertThat(matches("library/*", "library/alpine")).isTrue();
    assertThat(matches("library/*", "library/alpine/extra")).isFalse();
    assertThat(matches("library/*", "library")).isFalse();
    assertThat(matches("team/app-*", "team/app-web")).isTrue();
    assertThat(matches("team/app-*", "team/apps")).isFalse();
    assertThat(matches("*/app", "team/app")).isTrue();
    assertThat(matches("*/app", "a/team/app")).isFalse();
  }

  @Test
  void twoStarsCrossComponents() {
    assertThat(matches("team/**", "team/app")).isTrue();
    assertThat(matches("team/**", "team/app/web/x")).isTrue();
    assertThat(matches("team/**", "team")).isTrue();
    assertThat(matches("team/**", "teammate/app")).isFalse();
    assertThat(matches("team/**", "other/team/app")).isFalse();
    assertThat(matches("**/app", "a/b/app")).isTrue();
    assertThat(matches("**", "anything/at/all")).isTrue();
  }

  @Test
  void literalsMatchOnlyThemselves() {
    assertThat(matches("team/app", "team/app")).isTrue();
    assertThat(matches("team/app", "team/app2")).isFalse();
    assertThat(matches("team.app", "teamxapp")).isFalse();
  }

  @Test
  void namesCannotEscapeAPatternWithDotsEncodedSlashesOrCase() {
    // The API decodes %2F and then validates the name by the OCI grammar: '..', '.', upper case
    // and empty components never become a RepositoryName that a pattern is matched against.
    for (String escape :
        List.of(
            "team/../secret",
            "team/./secret",
            "team//secret",
            "Team/app",
            "team/%2fsecret",
            "team/app/")) {
      assertThatThrownBy(() -> new RepositoryName(escape))
          .as(escape)
          .isInstanceOf(OciException.class);
    }
    // Matched on the raw string, they would not match a narrower pattern anyway: matching is by
    // component.
    assertThat(new RepositoryGlob("team/*").matches("team/../secret")).isFalse();
    assertThat(new RepositoryGlob("team/app").matches("TEAM/APP")).isFalse();
  }

  @Test
  void patternsThatCouldNeverMatchOrMeanSomethingElseAreRefused() {
    for (String bad :
        List.of(
            "",
            " ",
            "Team/*",
            "team/../x",
            "team//x",
            "/team",
            "team/",
            "team/a**",
            "team/?",
            "team/{x}",
            "team/[ab]",
            "./x")) {
      assertThatThrownBy(() -> new RepositoryGlob(bad))
          .as("'%s'", bad)
          .isInstanceOf(IllegalArgumentException.class);
    }
  }

  @Test
  void pullThroughListsBindFromPropertiesAndDenyWins() {
    UpstreamProperties upstream =
        RegistryCacheProperties.upstream(
            Map.of(
                "url",
                "http://x",
                "pull-through.allow",
                "team/**,library/*",
                "pull-through.deny",
                "team/secret/**"));
    UpstreamProperties.PullThrough lists = upstream.pullThrough();
    assertThat(lists.permits("team/app")).isTrue();
    assertThat(lists.permits("library/alpine")).isTrue();
    assertThat(lists.permits("other/app")).isFalse();
    assertThat(lists.permits("team/secret/app")).isFalse();
    assertThat(lists.permits("team/secret")).isFalse();
    assertThat(
            RegistryCacheProperties.upstream(Map.of("url", "http://x"))
                .pullThrough()
                .permits("any/name"))
        .isTrue();
  }

  @Test
  void aBadPatternInConfigurationFailsBinding() {
    assertThatThrownBy(
            () ->
                RegistryCacheProperties.upstream(
                    Map.of("url", "http://x", "pull-through.deny", "Team/*")))
        .hasStackTraceContaining("lowercase");
  }
}
