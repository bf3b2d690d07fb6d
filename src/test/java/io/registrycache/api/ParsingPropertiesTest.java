package io.registrycache.api;

import static org.assertj.core.api.Assertions.assertThat;

import io.registrycache.oci.Digest;
import io.registrycache.oci.OciException;
import io.registrycache.oci.Reference;
import io.registrycache.oci.RepositoryName;
import java.nio.charset.StandardCharsets;
import java.util.List;
import net.jqwik.api.Arbitraries;
import net.jqwik.api.Arbitrary;
import net.jqwik.api.Combinators;
import net.jqwik.api.ForAll;
import net.jqwik.api.Property;
import net.jqwik.api.Provide;
import net.jqwik.api.constraints.LongRange;
import org.springframework.http.HttpRange;
import org.springframework.web.util.UriUtils;

/**
 * Property-based tests (jqwik) of what the registry port parses from clients: request paths,
 * repository names, references, digests and {@code Range} headers. Arbitrary input fails only
 * with the documented exception ({@link OciException}, or {@link IllegalArgumentException} for
 * percent-decoding and Spring's {@link HttpRange}), never with anything else; valid input
 * round-trips.
 */
class ParsingPropertiesTest {

  /** Strings over the characters that matter to the grammars, plus controls and non-ASCII. */
  @Provide
  Arbitrary<String> hostile() {
    Arbitrary<String> tokens = Arbitraries.of(
        "/", "//", ":", "@", ".", "..", "-", "_", "__", "%", "%0d%0a", "%00", "%zz", "%2F", "\r", "\n", "\0", " ",
        "sha256", "sha512", "sha256:", "manifests", "blobs", "uploads", "tags", "list", "referrers", "v2",
        "a", "Z", "0", "9", "abc", "latest", "é", "\u2028", "e3b0c44298fc1c149afbf4c8996fb924");
    return Arbitraries.oneOf(
        tokens.list().ofMaxSize(40).map(l -> String.join("", l)),
        Arbitraries.strings().ofMaxLength(300));
  }

  @Provide
  Arbitrary<String> validNames() {
    Arbitrary<String> alnum = Arbitraries.strings().withChars("abcdefghijklmnopqrstuvwxyz0123456789").ofMinLength(1).ofMaxLength(8);
    Arbitrary<String> separator = Arbitraries.of(".", "_", "__", "-", "--");
    Arbitrary<String> component = Combinators.combine(alnum, separator, alnum, Arbitraries.integers().between(0, 1))
        .as((a, s, b, two) -> two == 1 ? a + s + b : a);
    return component.list().ofMinSize(1).ofMaxSize(5).map(l -> String.join("/", l));
  }

  @Provide
  Arbitrary<String> validTags() {
    return Combinators.combine(
            Arbitraries.strings().withChars("abcXYZ019_").ofLength(1),
            Arbitraries.strings().withChars("abcXYZ019_.-").ofMaxLength(127))
        .as(String::concat);
  }

  @Property
  void registryPathsFailOnlyWithOciExceptions(@ForAll("hostile") String path) {
    try {
      RegistryPath p = RegistryPath.parse(path);
      assertThat(p.rawName()).isNotEmpty();
      assertThat(path).startsWith(p.rawName() + "/");
      if (p.reference() != null) {
        assertThat(path).endsWith("/" + p.reference());
      }
    } catch (OciException expected) {
      assertThat(expected.status().is4xxClientError()).isTrue();
    }
  }

  @Property
  void percentDecodingFailsOnlyWithIllegalArgument(@ForAll("hostile") String raw) {
    try {
      String decoded = UriUtils.decode(raw, StandardCharsets.UTF_8);
      RegistryPath.parse(decoded);
    } catch (OciException | IllegalArgumentException expected) {
      // documented failures
    }
  }

  @Property
  void repositoryNamesFailOnlyWithNameInvalid(@ForAll("hostile") String name) {
    try {
      assertThat(RepositoryName.parse(name).value()).isEqualTo(name);
    } catch (OciException expected) {
      assertThat(expected.code().name()).isEqualTo("NAME_INVALID");
    }
  }

  @Property
  void validRepositoryNamesRoundTrip(@ForAll("validNames") String name) {
    assertThat(RepositoryName.parse(name).value()).isEqualTo(name);
    RegistryPath p = RegistryPath.parse(name + "/manifests/latest");
    assertThat(p.rawName()).isEqualTo(name);
    assertThat(p.endpoint()).isEqualTo(RegistryPath.Endpoint.MANIFEST);
  }

  @Property
  void referencesFailOnlyWithTagOrDigestInvalid(@ForAll("hostile") String value) {
    try {
      assertThat(Reference.parse(value).toString()).isEqualTo(value);
    } catch (OciException expected) {
      assertThat(expected.code().name()).isIn("TAG_INVALID", "DIGEST_INVALID");
    }
  }

  @Property
  void validTagsAndDigestsRoundTrip(@ForAll("validTags") String tag, @ForAll byte[] content) {
    assertThat(Reference.parse(tag)).isEqualTo(new Reference.Tag(tag));
    Digest digest = Digest.sha256(content);
    assertThat(Digest.parse(digest.toString())).isEqualTo(digest);
    assertThat(Reference.parse(digest.toString())).isEqualTo(new Reference.ByDigest(digest));
    RegistryPath blob = RegistryPath.parse("team/app/blobs/" + digest);
    assertThat(blob.endpoint()).isEqualTo(RegistryPath.Endpoint.BLOB);
    assertThat(Digest.parse(blob.reference())).isEqualTo(digest);
  }

  @Property
  void digestsFailOnlyWithDigestInvalid(@ForAll("hostile") String value) {
    try {
      assertThat(Digest.parse(value).toString()).isEqualTo(value);
    } catch (OciException expected) {
      assertThat(expected.code().name()).isEqualTo("DIGEST_INVALID");
    }
  }

  @Provide
  Arbitrary<String> rangeHeaders() {
    Arbitrary<String> number = Arbitraries.oneOf(
        Arbitraries.longs().between(0, 5000).map(String::valueOf),
        Arbitraries.of("", "-1", "99999999999999999999", "x", " 1"));
    Arbitrary<String> spec = Combinators.combine(number, number).as((a, b) -> a + "-" + b);
    return Arbitraries.oneOf(
        Combinators.combine(Arbitraries.of("bytes=", "Bytes=", "bytes =", "items=", ""), spec.list().ofMinSize(1).ofMaxSize(3))
            .as((unit, specs) -> unit + String.join(",", specs)),
        Arbitraries.strings().ofMaxLength(60));
  }

  /** What the handler relies on: parse, then start/end for the blob's size, or IllegalArgumentException. */
  @Property
  void rangesFailOnlyWithIllegalArgumentAndStayWithinTheBlob(
      @ForAll("rangeHeaders") String header, @ForAll @LongRange(min = 1, max = 4096) long size) {
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
        assertThat(start).isNotNegative();
        assertThat(end).isLessThan(size);
      } catch (IllegalArgumentException expected) {
        // unsatisfiable for this size: the handler answers 416
      }
    }
  }

  @Property
  void satisfiableRangesGiveTheRequestedBytes(
      @ForAll @LongRange(min = 0, max = 1000) long first, @ForAll @LongRange(min = 0, max = 1000) long length,
      @ForAll @LongRange(min = 1, max = 3000) long size) {
    HttpRange range = HttpRange.parseRanges("bytes=" + first + "-" + (first + length)).get(0);
    if (first < size) {
      assertThat(range.getRangeStart(size)).isEqualTo(first);
      assertThat(range.getRangeEnd(size)).isEqualTo(Math.min(first + length, size - 1));
    }
  }
}
