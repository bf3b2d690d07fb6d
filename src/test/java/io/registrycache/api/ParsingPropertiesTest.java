package io.registrycache.api;

import static org.assertj.core.api.Assertions.assertThat;

import io.registrycache.oci.Digest;
import io.registrycache.oci.OciException;
import io.registrycache.oci.Reference;
import io.registrycache.oci.RepositoryName;
import io.registrycache.testsupport.Generated;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.Random;
import java.util.stream.Stream;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.Arguments;
import org.junit.jupiter.params.provider.MethodSource;
import org.springframework.http.HttpRange;
import org.springframework.web.util.UriUtils;

/**
 * Properties of what the registry port parses from clients, each over 1,000 generated values (the
 * same on every run): request paths, repository names, references, digests and {@code Range}
 * headers. Arbitrary input fails only with the documented exception ({@link OciException}, or
 * {@link IllegalArgumentException} for percent-decoding and Spring's {@link HttpRange}), never with
 * anything else; valid input round-trips.
 */
class ParsingPropertiesTest {

  private static final int TRIES = 1000;

  private static final List<String> HOSTILE_TOKENS =
      List.of(
          "/",
          "//",
          ":",
          "@",
          ".",
          "..",
          "-",
          "_",
          "__",
          "%",
          "%0d%0a",
          "%00",
          "%zz",
          "%2F",
          "\r",
          "\n",
          "\0",
          " ",
          "sha256",
          "sha512",
          "sha256:",
          "manifests",
          "blobs",
          "uploads",
          "tags",
          "list",
          "referrers",
          "v2",
          "a",
          "Z",
          "0",
          "9",
          "abc",
          "latest",
          "é",
          "\u2028",
          "e3b0c44298fc1c149afbf4c8996fb924");

  /** Strings over the characters that matter to the grammars, plus controls and non-ASCII. */
  static Stream<String> hostile() {
    return Generated.values(
        20_251,
        TRIES,
        r -> r.nextBoolean() ? Generated.tokens(r, HOSTILE_TOKENS, 40) : Generated.any(r, 300));
  }

  private static String component(Random r) {
    String alnum = "abcdefghijklmnopqrstuvwxyz0123456789";
    String a = Generated.of(r, alnum, 1, 8);
    return r.nextBoolean()
        ? a
        : a + Generated.oneOf(r, ".", "_", "__", "-", "--") + Generated.of(r, alnum, 1, 8);
  }

  static Stream<String> validNames() {
    return Generated.values(
        20_252,
        TRIES,
        r -> {
          List<String> components = new ArrayList<>();
          for (int i = 1 + r.nextInt(5); i > 0; i--) {
            components.add(component(r));
          }
          return String.join("/", components);
        });
  }

  static Stream<Arguments> validTagsAndContent() {
    return Generated.values(
        20_253,
        TRIES,
        r ->
            Arguments.of(
                Generated.of(r, "abcXYZ019_", 1, 1) + Generated.of(r, "abcXYZ019_.-", 0, 127),
                Generated.bytes(r, 0, 64)));
  }

  @ParameterizedTest(name = "[{index}]")
  @MethodSource("hostile")
  void registryPathsFailOnlyWithOciExceptions(String path) {
    try {
      RegistryPath p = RegistryPath.parse(path);
      assertThat(p.rawName()).as(path).isNotEmpty();
      assertThat(path).startsWith(p.rawName() + "/");
      if (p.reference() != null) {
        assertThat(path).endsWith("/" + p.reference());
      }
    } catch (OciException expected) {
      assertThat(expected.status().is4xxClientError()).as(path).isTrue();
    }
  }

  @ParameterizedTest(name = "[{index}]")
  @MethodSource("hostile")
  void percentDecodingFailsOnlyWithIllegalArgument(String raw) {
    try {
      String decoded = UriUtils.decode(raw, StandardCharsets.UTF_8);
      RegistryPath.parse(decoded);
    } catch (OciException | IllegalArgumentException expected) {
      // documented failures
    }
  }

  @ParameterizedTest(name = "[{index}]")
  @MethodSource("hostile")
  void repositoryNamesFailOnlyWithNameInvalid(String name) {
    try {
      assertThat(RepositoryName.parse(name).value()).isEqualTo(name);
    } catch (OciException expected) {
      assertThat(expected.code().name()).as(name).isEqualTo("NAME_INVALID");
    }
  }

  @ParameterizedTest(name = "[{index}] {0}")
  @MethodSource("validNames")
  void validRepositoryNamesRoundTrip(String name) {
    assertThat(RepositoryName.parse(name).value()).isEqualTo(name);
    RegistryPath p = RegistryPath.parse(name + "/manifests/latest");
    assertThat(p.rawName()).isEqualTo(name);
    assertThat(p.endpoint()).isEqualTo(RegistryPath.Endpoint.MANIFEST);
  }

  @ParameterizedTest(name = "[{index}]")
  @MethodSource("hostile")
  void referencesFailOnlyWithTagOrDigestInvalid(String value) {
    try {
      assertThat(Reference.parse(value).toString()).isEqualTo(value);
    } catch (OciException expected) {
      assertThat(expected.code().name()).as(value).isIn("TAG_INVALID", "DIGEST_INVALID");
    }
  }

  @ParameterizedTest(name = "[{index}] {0}")
  @MethodSource("validTagsAndContent")
  void validTagsAndDigestsRoundTrip(String tag, byte[] content) {
    assertThat(Reference.parse(tag)).isEqualTo(new Reference.Tag(tag));
    Digest digest = Digest.sha256(content);
    assertThat(Digest.parse(digest.toString())).isEqualTo(digest);
    assertThat(Reference.parse(digest.toString())).isEqualTo(new Reference.ByDigest(digest));
    RegistryPath blob = RegistryPath.parse("team/app/blobs/" + digest);
    assertThat(blob.endpoint()).isEqualTo(RegistryPath.Endpoint.BLOB);
    assertThat(Digest.parse(blob.reference())).isEqualTo(digest);
  }

  @ParameterizedTest(name = "[{index}]")
  @MethodSource("hostile")
  void digestsFailOnlyWithDigestInvalid(String value) {
    try {
      assertThat(Digest.parse(value).toString()).isEqualTo(value);
    } catch (OciException expected) {
      assertThat(expected.code().name()).as(value).isEqualTo("DIGEST_INVALID");
    }
  }

  private static String rangeNumber(Random r) {
    return r.nextBoolean()
        ? String.valueOf(Generated.between(r, 0, 5000))
        : Generated.oneOf(r, "", "-1", "99999999999999999999", "x", " 1");
  }

  /**
   * {@code Range} header values (well-formed units and specs, and anything) with a blob size of 1
   * to 4096.
   */
  static Stream<Arguments> rangeHeadersAndSizes() {
    return Generated.values(
        20_254,
        TRIES,
        r -> {
          String header;
          if (r.nextBoolean()) {
            List<String> specs = new ArrayList<>();
            for (int i = 1 + r.nextInt(3); i > 0; i--) {
              specs.add(rangeNumber(r) + "-" + rangeNumber(r));
            }
            header =
                Generated.oneOf(r, "bytes=", "Bytes=", "bytes =", "items=", "")
                    + String.join(",", specs);
          } else {
            header = Generated.any(r, 60);
          }
          return Arguments.of(header, Generated.between(r, 1, 4096));
        });
  }

  /**
   * What the handler relies on: parse, then start/end for the blob's size, or
   * IllegalArgumentException.
   */
  @ParameterizedTest(name = "[{index}] {1} bytes")
  @MethodSource("rangeHeadersAndSizes")
  void rangesFailOnlyWithIllegalArgumentAndStayWithinTheBlob(String header, long size) {
    List<HttpRange> ranges;
    try {
      ranges = HttpRange.parseRanges(header);
    } catch (IllegalArgumentException expected) {
      return;
    }
    for (HttpRange range : ranges) {
      try {
        long start = range.getRangeStart(size);
        long end = range.getRangeEnd(size);
        assertThat(start).as(header).isNotNegative();
        assertThat(end).as(header).isLessThan(size);
      } catch (IllegalArgumentException expected) {
        // unsatisfiable for this size: the handler answers 416
      }
    }
  }

  static Stream<Arguments> firstLengthAndSize() {
    return Generated.values(
        20_255,
        TRIES,
        r ->
            Arguments.of(
                Generated.between(r, 0, 1000),
                Generated.between(r, 0, 1000),
                Generated.between(r, 1, 3000)));
  }

  @ParameterizedTest(name = "[{index}] bytes={0}+{1} of {2}")
  @MethodSource("firstLengthAndSize")
  void satisfiableRangesGiveTheRequestedBytes(long first, long length, long size) {
    HttpRange range = HttpRange.parseRanges("bytes=" + first + "-" + (first + length)).get(0);
    if (first < size) {
      assertThat(range.getRangeStart(size)).isEqualTo(first);
      assertThat(range.getRangeEnd(size)).isEqualTo(Math.min(first + length, size - 1));
    }
  }
}
