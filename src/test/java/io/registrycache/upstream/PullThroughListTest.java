package io.registrycache.upstream;

import static org.assertj.core.api.Assertions.assertThatCode;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.registrycache.config.RegistryCacheProperties;
import io.registrycache.oci.OciErrorCode;
import io.registrycache.oci.OciException;
import io.registrycache.oci.RepositoryName;
import java.net.URI;
import java.util.Map;
import java.util.Set;
import org.assertj.core.api.Assertions;
import org.junit.jupiter.api.Test;

class PullThroughListTest {

  private static Upstream upstream(Map<String, String> settings) {
    return new Upstream(
        "hub",
        "registry-1.docker.io",
        URI.create("https://registry-1.docker.io"),
        Set.of(),
        true,
        RegistryCacheProperties.upstream(settings));
  }

  @Test
  void refusedNamesAre404NameUnknownAndTheCanonicalNameIsWhatIsMatched() {
    Upstream hub =
        upstream(
            Map.of(
                "url",
                "https://registry-1.docker.io",
                "pull-through.allow",
                "library/*,team/**",
                "pull-through.deny",
                "team/internal/**"));
    assertThatCode(() -> hub.requirePullThrough(hub.canonical(RepositoryName.parse("alpine"))))
        .doesNotThrowAnyException();
    assertThatCode(() -> hub.requirePullThrough(RepositoryName.parse("team/app")))
        .doesNotThrowAnyException();
    for (String refused :
        new String[] {"bitnami/redis", "team/internal/db", "library/alpine/extra"}) {
      assertThatThrownBy(() -> hub.requirePullThrough(RepositoryName.parse(refused)))
          .as(refused)
          .isInstanceOfSatisfying(
              OciException.class,
              e -> {
                Assertions.assertThat(e.code()).isEqualTo(OciErrorCode.NAME_UNKNOWN);
                Assertions.assertThat(e.status().value()).isEqualTo(404);
              });
    }
  }

  @Test
  void withoutListsEverythingIsPulledThrough() {
    assertThatCode(
            () ->
                upstream(Map.of("url", "https://registry-1.docker.io"))
                    .requirePullThrough(RepositoryName.parse("any/name/at/all")))
        .doesNotThrowAnyException();
  }
}
