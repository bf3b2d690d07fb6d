package io.registrycache.proxy;

import static io.registrycache.testsupport.CacheClient.describe;
import static org.assertj.core.api.Assertions.assertThat;

import com.jayway.jsonpath.JsonPath;
import io.registrycache.testsupport.CacheClient;
import io.registrycache.testsupport.CacheProperties;
import io.registrycache.testsupport.ManualCache;
import io.registrycache.testsupport.TestImages;
import io.registrycache.testsupport.TestImages.Image;
import io.registrycache.testsupport.UpstreamRegistryContainer;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Random;
import java.util.TreeSet;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * {@code GET /v2/<name>/tags/list} as the spec says, in front of a registry:2 that gets many tags
 * pushed in random order: lexical order, {@code n}/{@code last} honoured, a {@code Link} to the
 * next page in the request form the client used; the cached fallback with the upstream stopped
 * pages the same way.
 */
class TagListIT {

  static final String HOST = "upstream.test";
  static final Pattern NEXT = Pattern.compile("^<([^>]+)>; rel=\"next\"$");

  // its own registry: this test stops it
  static final UpstreamRegistryContainer upstream = new UpstreamRegistryContainer();

  @TempDir static Path storage;

  @BeforeAll
  static void startUpstream() {
    upstream.start();
  }

  @AfterAll
  static void stopUpstream() {
    upstream.stop();
  }

  @Test
  void manyUnsortedTagsArePagedInLexicalOrderInEveryRequestForm() throws Exception {
    String repository = TestImages.uniqueRepository("tags");
    Image image = upstream.pusher().push(TestImages.smallOci(repository, "seed"));
    List<String> pushed = new ArrayList<>(List.of("seed"));
    for (int i = 0; i < 60; i++) {
      // mixed case, digits of different widths, dots and dashes: lexical order is not push order
      pushed.add(List.of("v", "V", "release-", "1.", "a_").get(i % 5) + (i * 37 % 101));
    }
    Collections.shuffle(pushed, new Random(8));
    for (String tag : pushed) {
      upstream.pusher().pushManifest(repository, tag, image.manifest());
    }
    List<String> expected = new ArrayList<>(new TreeSet<>(pushed));

    try (ManualCache service = start()) {
      CacheClient cache = service.client();
      assertThat(tags(cache.get("/v2/" + repository + "/tags/list"))).isEqualTo(expected);
      for (String first :
          List.of(
              "/v2/" + repository + "/tags/list?n=7",
              "/v2/" + HOST + "/" + repository + "/tags/list?n=7",
              "/v2/" + repository + "/tags/list?n=7&ns=" + HOST)) {
        assertThat(pageThrough(cache, first, 7)).as(first).isEqualTo(expected);
      }
      // last in the middle, not itself a tag
      String middle = expected.get(20) + "~";
      List<String> after = tags(cache.get("/v2/" + repository + "/tags/list?last=" + middle));
      assertThat(after).isEqualTo(expected.subList(21, expected.size()));
    }
  }

  @Test
  void theCachedFallbackPagesTheSameWayWithTheUpstreamStopped() throws Exception {
    String repository = TestImages.uniqueRepository("tags-down");
    Image image = upstream.pusher().push(TestImages.smallOci(repository, "zeta"));
    List<String> pulled = List.of("zeta", "Beta", "alpha", "1.0", "delta");
    for (String tag : pulled) {
      upstream.pusher().pushManifest(repository, tag, image.manifest());
    }
    upstream.pusher().pushManifest(repository, "never-pulled", image.manifest());

    try (ManualCache service = start()) {
      CacheClient cache = service.client();
      for (String tag : pulled) {
        HttpResponse<byte[]> pull = cache.getManifest("/v2/" + repository + "/manifests/" + tag);
        assertThat(pull.statusCode()).as(describe(pull)).isEqualTo(200);
      }
      upstream.stopUpstream();
      try {
        List<String> expected = new ArrayList<>(new TreeSet<>(pulled));
        assertThat(pageThrough(cache, "/v2/" + repository + "/tags/list?n=2", 2))
            .isEqualTo(expected);
        assertThat(pageThrough(cache, "/v2/" + HOST + "/" + repository + "/tags/list?n=3", 3))
            .isEqualTo(expected);
        assertThat(tags(cache.get("/v2/" + repository + "/tags/list?last=alpha&ns=" + HOST)))
            .containsExactly("delta", "zeta");
      } finally {
        upstream.startUpstream();
      }
    }
  }

  private static ManualCache start() {
    return ManualCache.start(CacheProperties.cache(storage).localUpstream(HOST, upstream::baseUrl));
  }

  /**
   * Follows {@code Link} from {@code first}; asserts each page has at most {@code n} tags, each
   * link keeps the request form of {@code first}, and no tag repeats.
   */
  private static List<String> pageThrough(CacheClient cache, String first, int n) {
    List<String> seen = new ArrayList<>();
    String prefix = first.substring(0, first.indexOf('?'));
    boolean ns = first.contains("ns=" + HOST);
    String next = first;
    for (int pages = 0; next != null; pages++) {
      assertThat(pages).as("pages of %s", first).isLessThan(100);
      HttpResponse<byte[]> response = cache.get(next);
      List<String> page = tags(response);
      assertThat(page).as(next).hasSizeLessThanOrEqualTo(n);
      for (String tag : page) {
        assertThat(seen).as("repeated tag %s at %s", tag, next).doesNotContain(tag);
        seen.add(tag);
      }
      String link = response.headers().firstValue("Link").orElse(null);
      if (link == null) {
        next = null;
      } else {
        Matcher m = NEXT.matcher(link);
        assertThat(m.matches()).as(link).isTrue();
        next = m.group(1);
        assertThat(next)
            .startsWith(prefix + "?")
            .contains("n=" + n)
            .contains("last=" + page.get(page.size() - 1));
        assertThat(next.contains("ns=" + HOST)).as(next).isEqualTo(ns);
        assertThat(page).hasSize(n);
      }
    }
    return seen;
  }

  private static List<String> tags(HttpResponse<byte[]> response) {
    assertThat(response.statusCode()).as(describe(response)).isEqualTo(200);
    String json = new String(response.body(), StandardCharsets.UTF_8);
    return JsonPath.read(json, "$.tags");
  }
}
