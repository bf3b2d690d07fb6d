package io.registrycache.proxy;

import static org.assertj.core.api.Assertions.assertThat;

import io.registrycache.proxy.ProxyTagService.TagPage;
import java.nio.charset.StandardCharsets;
import java.util.List;
import org.junit.jupiter.api.Test;

class TagPageTest {

  private static final List<String> TAGS = List.of("a", "b", "c", "d");

  private static String json(TagPage p) {
    return new String(p.body(), StandardCharsets.UTF_8);
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
  void upstreamLinkQueryIsKept() {
    assertThat(TagPage.queryOf("</v2/x/tags/list?n=2&last=b>; rel=\"next\"")).isEqualTo("n=2&last=b");
    assertThat(TagPage.queryOf(null)).isNull();
  }
}
