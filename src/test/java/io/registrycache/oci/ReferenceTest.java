package io.registrycache.oci;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EmptySource;
import org.junit.jupiter.params.provider.ValueSource;
import org.springframework.http.HttpStatus;

class ReferenceTest {

  static final String SHA256 =
      "sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";

  @ParameterizedTest
  @ValueSource(
      strings = {
        "latest",
        "v1",
        "1.0.0",
        "v1.2.3-rc.1_build-4",
        "_underscore",
        "0",
        "A",
        "UPPER_and_lower",
        "a..b",
        "a--b",
        "trailing.",
        "trailing-",
      })
  void parsesTags(String value) {
    Reference ref = Reference.parse(value);
    assertThat(ref).isInstanceOf(Reference.Tag.class);
    assertThat(((Reference.Tag) ref).name()).isEqualTo(value);
    assertThat(ref).hasToString(value);
  }

  @Test
  void tagsAreCaseSensitive() {
    assertThat(Reference.parse("Latest")).isNotEqualTo(Reference.parse("latest"));
  }

  @Test
  void acceptsTagOf128Characters() {
    String tag = "t" + "a".repeat(127);
    assertThat(tag).hasSize(128);
    assertThat(Reference.parse(tag)).isEqualTo(new Reference.Tag(tag));
  }

  @Test
  void rejectsTagOf129Characters() {
    String tag = "t" + "a".repeat(128);
    assertThatThrownBy(() -> Reference.parse(tag))
        .isInstanceOfSatisfying(
            OciException.class,
            e -> {
              assertThat(e.code()).isEqualTo(OciErrorCode.TAG_INVALID);
              assertThat(e.status()).isEqualTo(HttpStatus.BAD_REQUEST);
            });
  }

  @ParameterizedTest
  @EmptySource
  @ValueSource(
      strings = {
        ".hidden",
        "-dash",
        ".",
        "..",
        "-",
        "a/b",
        "tag with space",
        "tag@x",
        "t\u00e4g",
        "tag\n",
        "tag%20",
        "+plus",
      })
  void rejectsInvalidTagsWithTagInvalid(String value) {
    assertThatThrownBy(() -> Reference.parse(value))
        .isInstanceOfSatisfying(
            OciException.class,
            e -> {
              assertThat(e.code()).isEqualTo(OciErrorCode.TAG_INVALID);
              assertThat(e.status()).isEqualTo(HttpStatus.BAD_REQUEST);
            });
  }

  @Test
  void parsesDigests() {
    Reference ref = Reference.parse(SHA256);
    assertThat(ref).isInstanceOf(Reference.ByDigest.class);
    assertThat(((Reference.ByDigest) ref).digest()).isEqualTo(Digest.parse(SHA256));
    assertThat(ref).hasToString(SHA256);
  }

  @ParameterizedTest
  @ValueSource(
      strings = {
        "sha256:abc",
        "sha256:" + "E3B0C44298FC1C149AFBF4C8996FB92427AE41E4649B934CA495991B7852B855",
        "md5:d41d8cd98f00b204e9800998ecf8427e",
        "latest:tag",
        ":",
      })
  void aReferenceWithAColonIsADigestAndMustBeValid(String value) {
    assertThatThrownBy(() -> Reference.parse(value))
        .isInstanceOfSatisfying(
            OciException.class, e -> assertThat(e.code()).isEqualTo(OciErrorCode.DIGEST_INVALID));
  }

  @Test
  void messageOfAHugeTagIsAbbreviated() {
    String tag = "x".repeat(100_000);
    assertThatThrownBy(() -> Reference.parse(tag))
        .isInstanceOf(OciException.class)
        .satisfies(e -> assertThat(e.getMessage().length()).isLessThan(1_000));
  }
}
