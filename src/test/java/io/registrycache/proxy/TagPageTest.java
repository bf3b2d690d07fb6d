package io.registrycache.proxy;

import static org.assertj.core.api.Assertions.assertThat;

import io.registrycache.proxy.ProxyTagService.TagPage;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Random;
import java.util.TreeSet;
import org.junit.jupiter.api.Test;
import org.springframework.util.MultiValueMap;
import org.springframework.web.util.UriComponentsBuilder;
import tools.jackson.databind.JsonNode;
import tools.jackson.databind.json.JsonMapper;

class TagPageTest {

  private static final List<String> TAGS = List.of("a", "b", "c", "d");
  private static final JsonMapper JSON = JsonMapper.builder().build();

  private static String json(TagPage p) {
    return new String(p.body(), StandardCharsets.UTF_8);
  }

  private static List<String> tags(TagPage p) {
    List<String> out = new ArrayList<>();
    JSON.readTree(p.body()).path("tags").forEach((JsonNode t) -> out.add(t.asString()));
    return out;
  }

  @Test
  void cachedTagsArePagedWithExclusiveLast() {
    TagPage first = TagPage.fromCache("x/y", TAGS, 2, null);
    assertThat(json(first)).isEqualTo("{\"name\":\"x/y\",\"tags\":[\"a\",\"b\"]}");
    assertThat(first.nextQuery()).isEqualTo("n=2&last=b");
    TagPage second = TagPage.fromCache("x/y", TAGS, 2, "b");
    assertThat(json(second)).isEqualTo("{\"name\":\"x/y\",\"tags\":[\"c\",\"d\"]}");
    assertThat(second.nextQuery()).isNull();
  }

  @Test
  void zeroPageSizeGivesAnEmptyListAndNoLink() {
    TagPage p = TagPage.fromCache("x", TAGS, 0, null);
    assertThat(json(p)).isEqualTo("{\"name\":\"x\",\"tags\":[]}");
    assertThat(p.nextQuery()).isNull();
  }

  @Test
  void unsortedInputIsListedInLexicalOrderAndLastNeedNotBeATag() {
    TagPage all =
        TagPage.fromCache("x", List.of("v10", "latest", "V2", "v1", "1.0", "v1"), null, null);
    assertThat(tags(all)).containsExactly("1.0", "V2", "latest", "v1", "v10");
    assertThat(all.nextQuery()).isNull();
    assertThat(tags(TagPage.fromCache("x", List.of("b", "d", "a"), null, "c")))
        .containsExactly("d");
    assertThat(tags(TagPage.fromCache("x", List.of("b", "d", "a"), null, "z"))).isEmpty();
  }

  /**
   * Property: for random tag sets in random order and every page size, following the next query
   * from the first page yields every tag exactly once, in lexical order, and the last page has no
   * next query.
   */
  @Test
  void pagingThroughYieldsEveryTagOnceInLexicalOrder() {
    Random random = new Random(8);
    String alphabet = "abcxyzABC019._-";
    for (int round = 0; round < 200; round++) {
      List<String> input = new ArrayList<>();
      int count = random.nextInt(40);
      for (int i = 0; i < count; i++) {
        StringBuilder tag = new StringBuilder().append(alphabet.charAt(random.nextInt(9)));
        for (int len = random.nextInt(6); len > 0; len--) {
          tag.append(alphabet.charAt(random.nextInt(alphabet.length())));
        }
        input.add(tag.toString());
      }
      Collections.shuffle(input, random);
      List<String> expected = new ArrayList<>(new TreeSet<>(input));
      int n = 1 + random.nextInt(expected.size() + 2);

      List<String> seen = new ArrayList<>();
      String last = null;
      for (int pages = 0; pages <= expected.size() + 1; pages++) {
        TagPage page = TagPage.fromCache("r", input, n, last);
        List<String> got = tags(page);
        assertThat(got.size()).isLessThanOrEqualTo(n);
        seen.addAll(got);
        if (page.nextQuery() == null) {
          break;
        }
        MultiValueMap<String, String> query =
            UriComponentsBuilder.newInstance().query(page.nextQuery()).build().getQueryParams();
        assertThat(query.getFirst("n")).isEqualTo(String.valueOf(n));
        last = query.getFirst("last");
        assertThat(last).isEqualTo(got.get(got.size() - 1));
      }
      assertThat(seen).as("input %s, n=%s", input, n).isEqualTo(expected);
    }
  }

  @Test
  void upstreamLinkQueryIsKept() {
    assertThat(TagPage.queryOf("</v2/x/tags/list?n=2&last=b>; rel=\"next\""))
        .isEqualTo("n=2&last=b");
    assertThat(TagPage.queryOf(null)).isNull();
    assertThat(
            ProxyTagService.nextOf("</v2/x/tags/list?last=a%2Bb&n=3>; rel=\"next\"")
                .toSingleValueMap())
        .containsEntry("last", "a+b")
        .containsEntry("n", "3");
    assertThat(ProxyTagService.nextOf(null)).isNull();
  }
}
