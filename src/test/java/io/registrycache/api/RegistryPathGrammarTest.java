package io.registrycache.api;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.catchThrowable;

import io.registrycache.api.RegistryPath.Endpoint;
import io.registrycache.oci.OciException;
import io.registrycache.testsupport.Generated;
import java.util.List;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import java.util.stream.Stream;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.MethodSource;

/**
 * {@link RegistryPath#parse} matches paths by hand exactly as the regular expressions it replaced
 * did (kept here as the oracle): same endpoint, name and reference, or NAME_UNKNOWN for both.
 */
class RegistryPathGrammarTest {

  private static final Pattern MANIFEST = Pattern.compile("(.+)/manifests/([^/]+)", Pattern.DOTALL);
  private static final Pattern BLOB_UPLOAD =
      Pattern.compile("(.+)/blobs/uploads(?:/.*)?", Pattern.DOTALL);
  private static final Pattern BLOB = Pattern.compile("(.+)/blobs/([^/]+)", Pattern.DOTALL);
  private static final Pattern TAGS = Pattern.compile("(.+)/tags/list", Pattern.DOTALL);
  private static final Pattern REFERRERS =
      Pattern.compile("(.+)/referrers/([^/]+)", Pattern.DOTALL);

  /** What the regular expressions said: endpoint, name, reference; null when none matched. */
  private static RegistryPath oracle(String path) {
    Matcher m;
    if ((m = BLOB_UPLOAD.matcher(path)).matches()) {
      return new RegistryPath(m.group(1), Endpoint.BLOB_UPLOAD, null);
    }
    if ((m = MANIFEST.matcher(path)).matches()) {
      return new RegistryPath(m.group(1), Endpoint.MANIFEST, m.group(2));
    }
    if ((m = BLOB.matcher(path)).matches()) {
      return new RegistryPath(m.group(1), Endpoint.BLOB, m.group(2));
    }
    if ((m = TAGS.matcher(path)).matches()) {
      return new RegistryPath(m.group(1), Endpoint.TAGS, null);
    }
    if ((m = REFERRERS.matcher(path)).matches()) {
      return new RegistryPath(m.group(1), Endpoint.REFERRERS, m.group(2));
    }
    return null;
  }

  private static final List<String> TOKENS =
      List.of(
          "/",
          "//",
          "a",
          "b/c",
          "manifests",
          "blobs",
          "uploads",
          "tags",
          "list",
          "referrers",
          "/manifests/",
          "/blobs/",
          "/blobs/uploads",
          "/blobs/uploads/",
          "/tags/list",
          "/referrers/",
          "sha256:ab",
          "v1",
          "\n",
          "\r",
          ":",
          ".");

  static Stream<String> paths() {
    return Generated.values(20_243, 5000, r -> Generated.tokens(r, TOKENS, 10));
  }

  @Test
  void theGeneratedPathsReachEveryEndpointAndNone() {
    List<RegistryPath> parsed = paths().map(RegistryPathGrammarTest::oracle).toList();
    assertThat(parsed).contains((RegistryPath) null);
    for (Endpoint endpoint : Endpoint.values()) {
      assertThat(parsed).as(endpoint.name()).anyMatch(p -> p != null && p.endpoint() == endpoint);
    }
  }

  @ParameterizedTest(name = "[{index}]")
  @MethodSource("paths")
  void sameAnswerAsTheRegularExpressions(String path) {
    RegistryPath expected = oracle(path);
    if (expected == null) {
      assertThat(catchThrowable(() -> RegistryPath.parse(path)))
          .as(path)
          .isInstanceOf(OciException.class);
    } else {
      assertThat(RegistryPath.parse(path)).as(path).isEqualTo(expected);
    }
  }
}
