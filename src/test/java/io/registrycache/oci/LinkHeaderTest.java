package io.registrycache.oci;

import static org.assertj.core.api.Assertions.assertThat;

import org.junit.jupiter.api.Test;

/**
 * The paging {@code Link} header (RFC 8288): only a link whose relation type is {@code next}
 * counts.
 */
class LinkHeaderTest {

  @Test
  void theNextLinkIsFoundWhateverItsSpellingAndPlace() {
    assertThat(LinkHeader.nextTarget("</v2/a/tags/list?n=2&last=b>; rel=\"next\""))
        .contains("/v2/a/tags/list?n=2&last=b");
    assertThat(LinkHeader.nextTarget("</v2/a/tags/list?last=b>; rel=next"))
        .contains("/v2/a/tags/list?last=b");
    assertThat(LinkHeader.nextTarget("</p1>; rel=\"prev\", </p3>; rel=\"next\"")).contains("/p3");
    assertThat(LinkHeader.nextTarget("</x>; title=\"a;b\"; REL=\"prev next\"")).contains("/x");
  }

  @Test
  void otherRelationTypesAndMalformedValuesNameNoNextPage() {
    assertThat(LinkHeader.nextTarget(null)).isEmpty();
    assertThat(LinkHeader.nextTarget("</p1>; rel=\"prev\"")).isEmpty();
    assertThat(LinkHeader.nextTarget("</p1>; rel=\"nextpage\"")).isEmpty();
    assertThat(LinkHeader.nextTarget("</p1>")).isEmpty();
    assertThat(LinkHeader.nextTarget("</p1; rel=\"next\"")).isEmpty();
  }

  @Test
  void whatIsWrittenIsReadBack() {
    String target = "/v2/team/app/tags/list?n=10&last=v1.2&ns=registry.example";
    assertThat(LinkHeader.nextTarget(LinkHeader.next(target))).contains(target);
  }
}
