package io.registrycache.oci;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import java.nio.charset.StandardCharsets;
import java.security.MessageDigest;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.NullAndEmptySource;
import org.junit.jupiter.params.provider.ValueSource;
import org.springframework.http.HttpStatus;

class DigestTest {

  static final String EMPTY_SHA256 =
      "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";
  static final String EMPTY_SHA512 =
      "cf83e1357eefb8bdf1542850d66d8007d620e4050b5715dc83f4a921d36ce9ce"
          + "47d0d13c5d85f2b0ff8318d2877eec2f63b931bd47417a81a538327af927da3e";

  @Test
  void parsesSha256() {
    Digest d = Digest.parse("sha256:" + EMPTY_SHA256);
    assertThat(d.algorithm()).isEqualTo("sha256");
    assertThat(d.hex()).isEqualTo(EMPTY_SHA256);
    assertThat(d).hasToString("sha256:" + EMPTY_SHA256);
  }

  @Test
  void parsesSha512() {
    Digest d = Digest.parse("sha512:" + EMPTY_SHA512);
    assertThat(d.algorithm()).isEqualTo("sha512");
    assertThat(d.hex()).hasSize(128);
  }

  @Test
  void equalDigestsAreEqual() {
    assertThat(Digest.parse("sha256:" + EMPTY_SHA256))
        .isEqualTo(new Digest("sha256", EMPTY_SHA256))
        .hasSameHashCodeAs(new Digest("sha256", EMPTY_SHA256));
  }

  @ParameterizedTest
  @NullAndEmptySource
  @ValueSource(
      strings = {
        "sha256",
        "sha256:",
        ":" + EMPTY_SHA256,
        EMPTY_SHA256,
        // unknown or unregistered algorithms
        "md5:d41d8cd98f00b204e9800998ecf8427e",
        "sha384:38b060a751ac96384cd9327eb1b1e36a21fdb71114be07434c0cc7bf63f6e1da274edebfe76f65fbd51ad2f14898b95b",
        "sha1:da39a3ee5e6b4b0d3255bfef95601890afd80709",
        "SHA256:" + EMPTY_SHA256,
        "sha-256:" + EMPTY_SHA256,
        // wrong length
        "sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b85",
        "sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b8555",
        "sha256:" + EMPTY_SHA512,
        "sha512:" + EMPTY_SHA256,
        // uppercase or non-hex
        "sha256:E3B0C44298FC1C149AFBF4C8996FB92427AE41E4649B934CA495991B7852B855",
        "sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b85G",
        "sha256:g3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
        "sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b85=",
        // stray characters
        " sha256:" + EMPTY_SHA256,
        "sha256:" + EMPTY_SHA256 + " ",
        "sha256:" + EMPTY_SHA256 + "\n",
        "sha256::" + EMPTY_SHA256,
        "sha256:" + EMPTY_SHA256 + ":",
        "sha256/../:" + EMPTY_SHA256,
      })
  void rejectsInvalidDigestsWithDigestInvalid(String value) {
    assertThatThrownBy(() -> Digest.parse(value))
        .isInstanceOfSatisfying(
            OciException.class,
            e -> {
              assertThat(e.code()).isEqualTo(OciErrorCode.DIGEST_INVALID);
              assertThat(e.status()).isEqualTo(HttpStatus.BAD_REQUEST);
            });
  }

  @Test
  void messageOfAHugeInvalidDigestIsAbbreviated() {
    String huge = "sha256:" + "z".repeat(100_000);
    assertThatThrownBy(() -> Digest.parse(huge))
        .isInstanceOf(OciException.class)
        .satisfies(e -> assertThat(e.getMessage().length()).isLessThan(1_000));
  }

  @Test
  void sha256OfBytes() {
    assertThat(Digest.sha256(new byte[0])).isEqualTo(new Digest("sha256", EMPTY_SHA256));
    assertThat(Digest.sha256("hello".getBytes(StandardCharsets.UTF_8)).hex())
        .isEqualTo("2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824");
  }

  @Test
  void recomputeUsesTheDigestsOwnAlgorithm() {
    Digest sha512 = Digest.parse("sha512:" + EMPTY_SHA512);
    assertThat(sha512.recompute(new byte[0])).isEqualTo(sha512);
    Digest sha256 = Digest.parse("sha256:" + EMPTY_SHA256);
    assertThat(sha256.recompute(new byte[0])).isEqualTo(sha256);
    assertThat(sha256.recompute(new byte[] {1})).isNotEqualTo(sha256);
  }

  @Test
  void matchesAStreamedDigest() {
    Digest hello = Digest.sha256("hello".getBytes(StandardCharsets.UTF_8));
    MessageDigest md = hello.newMessageDigest();
    md.update("hel".getBytes(StandardCharsets.UTF_8));
    md.update("lo".getBytes(StandardCharsets.UTF_8));
    assertThat(hello.matches(md)).isTrue();

    MessageDigest other = hello.newMessageDigest();
    other.update("hello!".getBytes(StandardCharsets.UTF_8));
    assertThat(hello.matches(other)).isFalse();
  }

  @Test
  void newMessageDigestFollowsAlgorithm() {
    assertThat(Digest.parse("sha256:" + EMPTY_SHA256).newMessageDigest().getDigestLength())
        .isEqualTo(32);
    assertThat(Digest.parse("sha512:" + EMPTY_SHA512).newMessageDigest().getDigestLength())
        .isEqualTo(64);
  }

  @Test
  void looksLikeDigestIsTheColonRule() {
    assertThat(Digest.looksLikeDigest("sha256:abc")).isTrue();
    assertThat(Digest.looksLikeDigest("latest")).isFalse();
    assertThat(Digest.looksLikeDigest("v1.2.3")).isFalse();
  }
}
