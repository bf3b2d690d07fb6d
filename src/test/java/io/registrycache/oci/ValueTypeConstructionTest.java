package io.registrycache.oci;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import org.junit.jupiter.api.Test;

/** No invalid value exists: the public constructors validate as the parsers do. */
class ValueTypeConstructionTest {

  private static void assertCode(Runnable construction, OciErrorCode code) {
    assertThatThrownBy(construction::run)
        .isInstanceOfSatisfying(OciException.class, e -> assertThat(e.code()).isEqualTo(code));
  }

  @Test
  void digestConstructorValidates() {
    assertCode(() -> new Digest("sha256", "abc"), OciErrorCode.DIGEST_INVALID);
    assertCode(
        () -> new Digest("md5", "d41d8cd98f00b204e9800998ecf8427e"), OciErrorCode.DIGEST_INVALID);
    assertCode(() -> new Digest("sha256", "A".repeat(64)), OciErrorCode.DIGEST_INVALID);
    assertCode(() -> new Digest(null, null), OciErrorCode.DIGEST_INVALID);
    assertThat(new Digest("sha256", "a".repeat(64)))
        .isEqualTo(Digest.parse("sha256:" + "a".repeat(64)));
  }

  @Test
  void repositoryNameConstructorValidates() {
    assertCode(() -> new RepositoryName("Library/Alpine"), OciErrorCode.NAME_INVALID);
    assertCode(() -> new RepositoryName("a//b"), OciErrorCode.NAME_INVALID);
    assertCode(() -> new RepositoryName(""), OciErrorCode.NAME_INVALID);
    assertThat(new RepositoryName("library/alpine").componentCount()).isEqualTo(2);
  }

  @Test
  void tagConstructorValidates() {
    assertCode(() -> new Reference.Tag("-leading-dash"), OciErrorCode.TAG_INVALID);
    assertCode(() -> new Reference.Tag("x".repeat(129)), OciErrorCode.TAG_INVALID);
    assertCode(() -> new Reference.Tag(null), OciErrorCode.TAG_INVALID);
    assertThat(new Reference.Tag("v1.2_rc-3").name()).isEqualTo("v1.2_rc-3");
    assertThatThrownBy(() -> new Reference.ByDigest(null)).isInstanceOf(NullPointerException.class);
  }

  @Test
  void mediaTypeIsALowercaseEssence() {
    assertThat(MediaType.parse("Application/VND.OCI.Image.Manifest.v1+JSON; charset=utf-8").value())
        .isEqualTo(MediaTypes.OCI_MANIFEST);
    assertThat(MediaType.parse(MediaTypes.OCI_INDEX).isIndex()).isTrue();
    assertThat(MediaType.parse("text/html").isManifest()).isFalse();
    assertThatThrownBy(() -> new MediaType("Text/HTML"))
        .isInstanceOf(IllegalArgumentException.class);
    assertThatThrownBy(() -> new MediaType("no-slash"))
        .isInstanceOf(IllegalArgumentException.class);
    assertThatThrownBy(() -> MediaType.parse("a/b/c")).isInstanceOf(IllegalArgumentException.class);
    assertThatThrownBy(() -> MediaType.parse(null)).isInstanceOf(IllegalArgumentException.class);
  }
}
