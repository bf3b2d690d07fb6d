package io.registrycache.proxy;

import static org.assertj.core.api.Assertions.assertThat;

import io.registrycache.metrics.CacheMetrics.Result;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.Test;
import tools.jackson.databind.JsonNode;
import tools.jackson.databind.json.JsonMapper;

/** Filtering and paging of a referrers list into image index pages. */
class ReferrersPageTest {

  static final JsonMapper JSON = JsonMapper.builder().build();

  static ProxyReferrersService.Referrers list() {
    List<JsonNode> descriptors = new ArrayList<>();
    for (String[] d :
        new String[][] {{"sha256:c", "sig"}, {"sha256:a", "sig"}, {"sha256:b", "sbom"}}) {
      descriptors.add(
          JSON.readTree(
              "{\"mediaType\":\"application/vnd.oci.image.manifest.v1+json\",\"digest\":\""
                  + d[0]
                  + "\",\"size\":1,\"artifactType\":\""
                  + d[1]
                  + "\",\"annotations\":{\"k\":\"v\"}}"));
    }
    return new ProxyReferrersService.Referrers(descriptors, Result.HIT);
  }

  static List<String> digests(ProxyReferrersService.Page page) {
    JsonNode index = JSON.readTree(page.body());
    assertThat(index.path("schemaVersion").asInt()).isEqualTo(2);
    assertThat(index.path("mediaType").asString())
        .isEqualTo("application/vnd.oci.image.index.v1+json");
    List<String> out = new ArrayList<>();
    index.path("manifests").forEach(d -> out.add(d.path("digest").asString()));
    return out;
  }

  @Test
  void pagesInDigestOrderAfterTheLastDigestAndKeepsDescriptorsWhole() {
    ProxyReferrersService.Page first = list().page(null, null, 2);
    assertThat(digests(first)).containsExactly("sha256:a", "sha256:b");
    assertThat(first.nextAfter()).isEqualTo("sha256:b");
    ProxyReferrersService.Page second = list().page(null, "sha256:b", 2);
    assertThat(digests(second)).containsExactly("sha256:c");
    assertThat(second.nextAfter()).isNull();
    assertThat(
            JSON.readTree(first.body())
                .path("manifests")
                .get(0)
                .path("annotations")
                .path("k")
                .asString())
        .isEqualTo("v");
  }

  @Test
  void filtersByArtifactTypeBeforePaging() {
    ProxyReferrersService.Page page = list().page("sig", null, 1);
    assertThat(digests(page)).containsExactly("sha256:a");
    assertThat(page.nextAfter()).isEqualTo("sha256:a");
    assertThat(digests(list().page("sig", "sha256:a", 1))).containsExactly("sha256:c");
    assertThat(digests(list().page("none", null, 10))).isEmpty();
  }

  @Test
  void anUnknownLastDigestContinuesInDigestOrder() {
    assertThat(digests(list().page(null, "sha256:aa", 2))).containsExactly("sha256:b", "sha256:c");
    ProxyReferrersService.Page page = list().page(null, "sha256:gone", 2);
    assertThat(digests(page)).isEmpty();
    assertThat(page.nextAfter()).isNull();
  }
}
