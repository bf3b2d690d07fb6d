package io.registrycache.oci;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import java.util.Collections;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.NullAndEmptySource;
import org.junit.jupiter.params.provider.ValueSource;
import org.springframework.http.HttpStatus;

class RepositoryNameTest {

  @ParameterizedTest
  @ValueSource(
      strings = {
        "a",
        "alpine",
        "library/alpine",
        "foo/bar/baz",
        "a0/b1/c2",
        "0",
        "my.repo",
        "my_repo",
        "my__repo",
        "my-repo",
        "my---repo",
        "a.b.c/d_e/f-g",
        "it/small-12345678-abcd",
      })
  void acceptsValidNames(String value) {
    RepositoryName name = RepositoryName.parse(value);
    assertThat(name.value()).isEqualTo(value);
    assertThat(name).hasToString(value);
  }

  @ParameterizedTest
  @NullAndEmptySource
  @ValueSource(
      strings = {
        // uppercase
        "Alpine",
        "library/Alpine",
        "FOO",
        // empty segments
        "/",
        "/alpine",
        "alpine/",
        "library//alpine",
        // dot segments and doubled separators
        "..",
        ".",
        "library/..",
        "../etc/passwd",
        "a/../b",
        "a..b",
        "a___b",
        "a._b",
        "a.-b",
        "a-.b",
        // separators at the ends of a component
        "-alpine",
        "alpine-",
        "_alpine",
        "alpine_",
        ".alpine",
        "alpine.",
        "library/-x",
        // characters outside the grammar
        "alp ine",
        "alpine:latest",
        "alpine@sha256",
        "a\\b",
        "a%2fb",
        "al\u00e9pine",
        "a\nb",
        "a\u0000b",
      })
  void rejectsInvalidNamesWithNameInvalid(String value) {
    assertThatThrownBy(() -> RepositoryName.parse(value))
        .isInstanceOfSatisfying(
            OciException.class,
            e -> {
              assertThat(e.code()).isEqualTo(OciErrorCode.NAME_INVALID);
              assertThat(e.status()).isEqualTo(HttpStatus.BAD_REQUEST);
            });
  }

  @Test
  void acceptsExactly255Characters() {
    String name = "a".repeat(100) + "/" + "b".repeat(100) + "/" + "c".repeat(53);
    assertThat(name).hasSize(255);
    assertThat(RepositoryName.parse(name).value()).isEqualTo(name);
  }

  @Test
  void rejects256Characters() {
    String name = "a".repeat(100) + "/" + "b".repeat(100) + "/" + "c".repeat(54);
    assertThat(name).hasSize(256);
    assertThatThrownBy(() -> RepositoryName.parse(name))
        .isInstanceOfSatisfying(
            OciException.class, e -> assertThat(e.code()).isEqualTo(OciErrorCode.NAME_INVALID));
  }

  @Test
  void rejectsAHugeNameWithAShortMessage() {
    String name = "a".repeat(1_000_000);
    assertThatThrownBy(() -> RepositoryName.parse(name))
        .isInstanceOf(OciException.class)
        .satisfies(e -> assertThat(e.getMessage().length()).isLessThan(1_000));
  }

  @Test
  void acceptsManySegments() {
    String name = String.join("/", Collections.nCopies(100, "a"));
    RepositoryName parsed = RepositoryName.parse(name);
    assertThat(parsed.componentCount()).isEqualTo(100);
  }

  @Test
  void countsComponents() {
    assertThat(RepositoryName.parse("alpine").componentCount()).isEqualTo(1);
    assertThat(RepositoryName.parse("library/alpine").componentCount()).isEqualTo(2);
    assertThat(RepositoryName.parse("a/b/c/d").componentCount()).isEqualTo(4);
  }

  @Test
  void componentGrammarIsNotVulnerableToCatastrophicBacktracking() {
    // A long run of separators that fails only at the end must still be rejected quickly.
    String nasty = "a" + "-a".repeat(120) + "-";
    long start = System.nanoTime();
    assertThatThrownBy(() -> RepositoryName.parse(nasty)).isInstanceOf(OciException.class);
    assertThat(System.nanoTime() - start).isLessThan(1_000_000_000L);
  }
}
