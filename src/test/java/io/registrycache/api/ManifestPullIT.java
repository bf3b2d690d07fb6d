package io.registrycache.api;

import static io.registrycache.testsupport.CacheClient.describe;
import static org.assertj.core.api.Assertions.assertThat;

import com.jayway.jsonpath.JsonPath;
import io.registrycache.it.AbstractCacheIT;
import io.registrycache.testsupport.CacheClient;
import io.registrycache.testsupport.Sha256;
import io.registrycache.testsupport.TestImages;
import io.registrycache.testsupport.TestImages.Blob;
import io.registrycache.testsupport.TestImages.Image;
import io.registrycache.testsupport.TestImages.ImageIndex;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.util.List;
import org.junit.jupiter.api.Test;

/** Manifests through the cache: byte-exact, right headers, by tag and by digest, HEAD, indexes. */
class ManifestPullIT extends AbstractCacheIT {

  @Test
  void ociManifestByTagThenByDigestIsByteExact() {
    Image image =
        upstream.pusher().push(TestImages.smallOci(TestImages.uniqueRepository("man"), "v1"));

    HttpResponse<byte[]> byTag = cache.getManifest("/v2/" + image.repository() + "/manifests/v1");
    CacheClient.assertManifest(byTag, image.manifest());

    HttpResponse<byte[]> byDigest =
        cache.getManifest("/v2/" + image.repository() + "/manifests/" + image.manifest().digest());
    CacheClient.assertManifest(byDigest, image.manifest());
    assertThat(byDigest.body()).isEqualTo(byTag.body());
  }

  @Test
  void manifestByDigestFirstIsByteExact() {
    Image image =
        upstream.pusher().push(TestImages.smallOci(TestImages.uniqueRepository("man"), "v1"));
    CacheClient.assertManifest(
        cache.getManifest("/v2/" + image.repository() + "/manifests/" + image.manifest().digest()),
        image.manifest());
    CacheClient.assertManifest(
        cache.getManifest("/v2/" + image.repository() + "/manifests/v1"), image.manifest());
  }

  @Test
  void dockerSchema2ManifestKeepsItsMediaType() {
    Image image =
        upstream
            .pusher()
            .push(TestImages.dockerSchema2(TestImages.uniqueRepository("docker"), "v2"));
    CacheClient.assertManifest(
        cache.getManifest("/v2/" + image.repository() + "/manifests/v2"), image.manifest());
    CacheClient.assertManifest(
        cache.getManifest("/v2/" + image.repository() + "/manifests/" + image.manifest().digest()),
        image.manifest());
    for (Blob blob : image.blobs()) {
      HttpResponse<byte[]> response =
          cache.get("/v2/" + image.repository() + "/blobs/" + blob.digest());
      assertThat(response.statusCode()).as(describe(response)).isEqualTo(200);
      assertThat(Sha256.digest(response.body())).isEqualTo(blob.digest());
    }
  }

  @Test
  void headManifestHasTheHeadersOfGetAndNoBody() {
    Image image =
        upstream.pusher().push(TestImages.smallOci(TestImages.uniqueRepository("head"), "v1"));
    String path = "/v2/" + image.repository() + "/manifests/v1";

    // HEAD first (cold): must still be right
    HttpResponse<byte[]> cold = cache.headManifest(path);
    CacheClient.assertHeadOf(cold, image.manifest());

    HttpResponse<byte[]> get = cache.getManifest(path);
    CacheClient.assertManifest(get, image.manifest());

    HttpResponse<byte[]> warm = cache.headManifest(path);
    CacheClient.assertHeadOf(warm, image.manifest());
    HttpResponse<byte[]> byDigest =
        cache.headManifest("/v2/" + image.repository() + "/manifests/" + image.manifest().digest());
    CacheClient.assertHeadOf(byDigest, image.manifest());
  }

  @Test
  void indexLeadsToEachPlatformManifestByDigest() {
    ImageIndex index =
        upstream.pusher().push(TestImages.index(TestImages.uniqueRepository("index"), "multi"));

    HttpResponse<byte[]> indexResponse =
        cache.getManifest("/v2/" + index.repository() + "/manifests/multi");
    CacheClient.assertManifest(indexResponse, index.index());

    String json = new String(indexResponse.body(), StandardCharsets.UTF_8);
    for (String arch : List.of("amd64", "arm64")) {
      List<String> digests =
          JsonPath.read(json, "$.manifests[?(@.platform.architecture == '" + arch + "')].digest");
      assertThat(digests).hasSize(1);
      Image platform = index.platform(arch).image();
      assertThat(digests.get(0)).isEqualTo(platform.manifest().digest());

      HttpResponse<byte[]> manifest =
          cache.getManifest("/v2/" + index.repository() + "/manifests/" + digests.get(0));
      CacheClient.assertManifest(manifest, platform.manifest());
      for (Blob blob : platform.blobs()) {
        HttpResponse<byte[]> response =
            cache.get("/v2/" + index.repository() + "/blobs/" + blob.digest());
        assertThat(response.statusCode()).as(describe(response)).isEqualTo(200);
        assertThat(Sha256.digest(response.body())).isEqualTo(blob.digest());
      }
    }
    // the index again by digest
    CacheClient.assertManifest(
        cache.getManifest("/v2/" + index.repository() + "/manifests/" + index.index().digest()),
        index.index());
  }

  @Test
  void secondPullOfATagIsServedFromTheCache() {
    Image image =
        upstream.pusher().push(TestImages.smallOci(TestImages.uniqueRepository("hit"), "v1"));
    String path = "/v2/" + image.repository() + "/manifests/v1";
    CacheClient.assertManifest(cache.getManifest(path), image.manifest());
    upstream.syncLogs();
    long afterFirst = upstream.countRequestsUnder("/v2/" + image.repository() + "/manifests/");
    assertThat(afterFirst).isPositive();

    CacheClient.assertManifest(cache.getManifest(path), image.manifest());
    CacheClient.assertManifest(
        cache.getManifest("/v2/" + image.repository() + "/manifests/" + image.manifest().digest()),
        image.manifest());
    upstream.syncLogs();
    assertThat(upstream.countRequestsUnder("/v2/" + image.repository() + "/manifests/"))
        .as("tag-ttl is 1h: no upstream request for a cached tag or its digest")
        .isEqualTo(afterFirst);
  }

  @Test
  void tagsListNamesThePushedTags() {
    String repository = TestImages.uniqueRepository("tags");
    upstream.pusher().push(TestImages.smallOci(repository, "b-tag"));
    upstream.pusher().push(TestImages.smallOci(repository, "a-tag"));

    HttpResponse<byte[]> response = cache.get("/v2/" + repository + "/tags/list");
    assertThat(response.statusCode()).as(describe(response)).isEqualTo(200);
    String json = new String(response.body(), StandardCharsets.UTF_8);
    List<String> tags = JsonPath.read(json, "$.tags");
    // lexical order, as the spec asks, whatever order the upstream lists them in
    assertThat(tags).containsExactly("a-tag", "b-tag");
    assertThat((String) JsonPath.read(json, "$.name")).isEqualTo(repository);
  }
}
