package io.registrycache.admin;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import com.google.re2j.Pattern;
import io.registrycache.oci.Digest;
import io.registrycache.storage.CacheCollector;
import io.registrycache.testsupport.TestCache;
import io.registrycache.upstream.Upstreams;
import java.nio.file.Path;
import java.time.Duration;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** Prune selection (age, pattern, count, dry run) and image eviction over a real folder. */
class PrunerTest {

  @TempDir Path root;
  private TestCache cache;
  private Pruner pruner;
  private CacheInventory inventory;
  private Digest shared;

  @BeforeEach
  void setUp() {
    cache = new TestCache(root, 0, Duration.ZERO);
    inventory = new CacheInventory(cache.manifests, cache.blobs, cache.collector);
    pruner =
        new Pruner(
            cache.manifests,
            inventory,
            cache.collector,
            cache.clock,
            new Upstreams(cache.properties));
    shared = cache.blob(1000); // a base layer every image uses
  }

  @AfterEach
  void tearDown() {
    cache.close();
  }

  private Digest image(String repository, String tag) {
    Digest m = cache.manifest(cache.blob(10), shared, cache.blob(500));
    cache.tag("local", repository, tag, m);
    cache.clock.advance(Duration.ofDays(1));
    return m;
  }

  private static String images(CacheCollector.Removal r) {
    return r.tags().stream().map(t -> t.image()).sorted().toList().toString();
  }

  @Test
  void byAgeRemovesOldTagsAndOnlyTheContentTheyAloneUsed() {
    Digest v1 = image("app", "v1"); // pulled 3 days ago
    Digest v2 = image("app", "v2"); // 2 days ago
    Digest v3 = image("app", "v3"); // 1 day ago

    CacheCollector.Removal r =
        pruner.prune(new PruneRequest(Duration.ofHours(36), null, null, false));

    assertThat(images(r)).isEqualTo("[local/app:v1, local/app:v2]");
    assertThat(r.manifests())
        .extracting(CacheCollector.Item::digest)
        .containsExactlyInAnyOrder(v1, v2);
    assertThat(r.blobs()).hasSize(4); // two configs, two own layers; never the shared layer
    assertThat(cache.blobs.size(shared)).isPresent();
    assertThat(cache.manifests.entry(v3)).isPresent();
    assertThat(inventory.images(null)).extracting(CacheInventory.Image::tag).containsExactly("v3");
    assertThat(inventory.images(null).get(0).complete()).isTrue();
  }

  @Test
  void dryRunReportsWithoutRemoving() {
    image("app", "v1");
    image("app", "v2");
    long before = cache.total();

    CacheCollector.Removal r =
        pruner.prune(new PruneRequest(Duration.ofHours(36), null, null, true));

    assertThat(r.dryRun()).isTrue();
    assertThat(images(r)).isEqualTo("[local/app:v1]");
    assertThat(r.bytes()).isGreaterThan(510);
    assertThat(cache.total()).isEqualTo(before);
    assertThat(cache.manifests.allTags()).hasSize(2);
  }

  @Test
  void byPatternMatchesTheWholeUpstreamRepositoryTag() {
    image("app", "v1");
    image("app", "v1-debug");
    image("other/app", "v1-debug");

    CacheCollector.Removal r =
        pruner.prune(new PruneRequest(null, Pattern.compile("local/app:.*-debug"), null, false));

    assertThat(images(r)).isEqualTo("[local/app:v1-debug]");
    assertThat(cache.manifests.allTags()).hasSize(2);
  }

  @Test
  void byCountKeepsTheMostRecentlyPulledTagsPerRepository() {
    Digest v1 = image("app", "v1");
    image("app", "v2");
    image("app", "v3");
    image("db", "v1");
    cache.pullManifest(v1); // v1 is now the most recently pulled of app

    CacheCollector.Removal r = pruner.prune(new PruneRequest(null, null, 2, false));

    assertThat(images(r)).isEqualTo("[local/app:v2]");
  }

  @Test
  void criteriaCombineWithAnd() {
    image("app", "v1");
    image("app", "v2");
    image("app", "v3");
    CacheCollector.Removal r =
        pruner.prune(
            new PruneRequest(Duration.ofHours(60), Pattern.compile(".*:v[12]"), null, true));
    assertThat(images(r)).isEqualTo("[local/app:v1]");
  }

  @Test
  void aManifestStillTaggedElsewhereStays() {
    Digest m = image("app", "v1");
    cache.tag("local", "app", "latest", m);
    CacheCollector.Removal r =
        pruner.prune(new PruneRequest(null, Pattern.compile(".*:v1"), null, false));
    assertThat(images(r)).isEqualTo("[local/app:v1]");
    assertThat(r.manifests()).isEmpty();
    assertThat(cache.manifests.entry(m)).isPresent();
  }

  @Test
  void evictOneImageByTagOrByDigest() {
    Digest v1 = image("app", "v1");
    Digest v2 = image("app", "v2");
    cache.tag("local", "app", "stable", v2);

    CacheCollector.Removal byTag = pruner.evict("local", "app", "v1", null, false);
    assertThat(byTag.manifests()).extracting(CacheCollector.Item::digest).containsExactly(v1);

    CacheCollector.Removal byDigest = pruner.evict("local", null, null, v2, false);
    assertThat(images(byDigest)).isEqualTo("[local/app:stable, local/app:v2]");
    assertThat(cache.manifests.allTags()).isEmpty();
    assertThat(cache.blobs.count()).isZero(); // the shared layer went with the last image
  }

  @Test
  void untaggedManifestsAndOrphanBlobsGoByAgeOnly() {
    Digest untagged = cache.manifest(cache.blob(10));
    Digest orphan = cache.blob(50);
    cache.clock.advance(Duration.ofDays(2));
    image("app", "v1");

    assertThat(pruner.prune(new PruneRequest(null, Pattern.compile(".*"), null, true)).manifests())
        .extracting(CacheCollector.Item::digest)
        .doesNotContain(untagged);
    CacheCollector.Removal r =
        pruner.prune(new PruneRequest(Duration.ofDays(1), null, null, false));
    assertThat(r.manifests()).extracting(CacheCollector.Item::digest).containsExactly(untagged);
    assertThat(r.blobs()).extracting(CacheCollector.Item::digest).contains(orphan);
    assertThat(cache.blobs.size(shared)).isPresent();
  }

  @Test
  void aRequestNeedsACriterion() {
    assertThatThrownBy(() -> new PruneRequest(null, null, null, true))
        .isInstanceOf(IllegalArgumentException.class);
  }
}
