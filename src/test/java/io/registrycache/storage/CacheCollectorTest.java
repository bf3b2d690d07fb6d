package io.registrycache.storage;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import io.registrycache.oci.Digest;
import io.registrycache.oci.Reference;
import io.registrycache.testsupport.TestCache;
import java.nio.ByteBuffer;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** Eviction under the disk budget, over a real folder: order, watermarks, cascade, grace. */
class CacheCollectorTest {

  @TempDir Path root;
  private TestCache cache;

  @AfterEach
  void close() {
    if (cache != null) {
      cache.close();
    }
  }

  private void step() {
    cache.clock.advance(Duration.ofMinutes(1));
  }

  @Test
  void underTheHighWatermarkNothingIsEvicted() {
    cache = new TestCache(root, 10_000, Duration.ZERO);
    cache.blob(4000);
    cache.blob(4000); // 8000 <= 9000
    CacheCollector.Removal r = cache.collector.enforceBudget();
    assertThat(r.blobs()).isEmpty();
    assertThat(cache.blobs.count()).isEqualTo(2);
  }

  @Test
  void unlimitedBudgetNeverEvicts() {
    cache = new TestCache(root, 0, Duration.ZERO);
    cache.blob(100_000);
    assertThat(cache.collector.overHighWatermark()).isFalse();
    assertThat(cache.collector.enforceBudget().blobs()).isEmpty();
  }

  @Test
  void evictsLeastRecentlyPulledFirstDownToTheLowWatermark() {
    cache = new TestCache(root, 10_000, Duration.ZERO);
    Digest a = cache.blob(2000);
    step();
    Digest b = cache.blob(2000);
    step();
    Digest c = cache.blob(2000);
    step();
    Digest d = cache.blob(2000);
    step();
    cache.pullBlob(a); // a is now the most recently pulled
    step();
    Digest e = cache.blob(2000); // 10000 > 9000
    assertThat(cache.collector.overHighWatermark()).isTrue();

    CacheCollector.Removal r = cache.collector.enforceBudget();

    // down to <= 5000: b, c, d go (oldest first); a (pulled) and e (newest) stay
    assertThat(r.blobs()).extracting(CacheCollector.Item::digest).containsExactly(b, c, d);
    assertThat(cache.blobs.bytes()).isLessThanOrEqualTo(5000);
    assertThat(cache.blobs.size(a)).isPresent();
    assertThat(cache.blobs.size(e)).isPresent();
    assertThat(Files.exists(cache.layout.blob(b))).isFalse();
    assertThat(
            cache
                .meters
                .counter("registry.cache.evictions", "kind", "blob", "reason", "budget")
                .count())
        .isEqualTo(3);
    assertThat(
            cache
                .meters
                .counter("registry.cache.evicted.bytes", "kind", "blob", "reason", "budget")
                .count())
        .isEqualTo(6000);
  }

  @Test
  void pullingAManifestKeepsItsBlobsAndEvictingABlobTakesItsManifestsAndTagsAlong() {
    cache = new TestCache(root, 10_000, Duration.ZERO);
    Digest oldConfig = cache.blob(100);
    Digest oldLayer = cache.blob(3000);
    Digest oldImage = cache.manifest(oldConfig, oldLayer);
    cache.tag("local", "team/old", "v1", oldImage);
    step();
    Digest usedConfig = cache.blob(100);
    Digest usedLayer = cache.blob(3000);
    Digest usedImage = cache.manifest(usedConfig, usedLayer);
    cache.tag("local", "team/used", "v1", usedImage);
    step();
    Digest newer = cache.blob(2000);
    step();
    cache.pullManifest(oldImage); // touches oldConfig and oldLayer: now the newest
    step();
    cache.blob(1200); // total > 9000

    cache.collector.enforceBudget();

    // The used image was least recently pulled: its blobs, manifest and tag link went.
    assertThat(cache.blobs.size(usedLayer)).isEmpty();
    assertThat(cache.manifests.entry(usedImage)).isEmpty();
    assertThat(cache.manifests.findTag("local", "team/used", new Reference.Tag("v1"))).isEmpty();
    // The image pulled recently is whole.
    assertThat(cache.blobs.size(oldLayer)).isPresent();
    assertThat(cache.blobs.size(oldConfig)).isPresent();
    assertThat(cache.manifests.entry(oldImage)).isPresent();
    assertThat(cache.manifests.findTag("local", "team/old", new Reference.Tag("v1"))).isPresent();
    assertThat(cache.total()).isLessThanOrEqualTo(5000);
    assertThat(cache.blobs.size(newer)).isEmpty();
  }

  @Test
  void evictingAChildManifestsBlobTakesTheIndexAlong() {
    cache = new TestCache(root, 10_000, Duration.ZERO);
    Digest config = cache.blob(100);
    Digest layer = cache.blob(5000);
    Digest child = cache.manifest(config, layer);
    Digest index = cache.index(child);
    cache.tag("local", "multi", "latest", index);
    step();
    cache.blob(4500);

    cache.collector.enforceBudget();

    assertThat(cache.blobs.size(layer)).isEmpty();
    assertThat(cache.manifests.entry(child)).isEmpty();
    assertThat(cache.manifests.entry(index)).isEmpty();
    assertThat(cache.manifests.tags("local", "multi")).isEmpty();
  }

  @Test
  void anEvictedFileStaysForTheGraceAndAReFetchedOneIsNeverDeleted() throws Exception {
    cache = new TestCache(root, 0, Duration.ofMillis(300));
    Digest a = cache.blob(100);
    Digest b = cache.blob(100);
    assertThat(cache.blobs.delete(a)).isTrue();
    assertThat(cache.blobs.delete(b)).isTrue();
    // Out of the index at once (a lookup is a miss), file still there for a reader that looked it
    // up.
    assertThat(cache.blobs.lookup(a)).isEmpty();
    assertThat(Files.exists(cache.layout.blob(a))).isTrue();
    // b is stored again within the grace.
    ContentWriter again = cache.blobs.newWriter(b);
    again.append(ByteBuffer.wrap(Files.readAllBytes(cache.layout.blob(b))));
    again.commit(100);

    // a's file goes once the grace is over; b's, fetched again meanwhile, never does
    await().atMost(Duration.ofSeconds(10)).until(() -> !Files.exists(cache.layout.blob(a)));
    assertThat(Files.exists(cache.layout.blob(b))).isTrue();
    assertThat(cache.blobs.size(b)).contains(100L);
  }

  @Test
  void anItemPulledAfterSelectionIsKept() {
    cache = new TestCache(root, 0, Duration.ZERO);
    Digest a = cache.blob(100);
    long selectedAt = cache.blobs.entry(a).orElseThrow().lastPulledMillis();
    step();
    cache.pullBlob(a);
    assertThat(cache.blobs.evict(a, selectedAt)).isEqualTo(-1);
    assertThat(cache.blobs.size(a)).isPresent();
  }

  @Test
  void lastPulledTimesSurviveARestart() throws Exception {
    cache = new TestCache(root, 0, Duration.ZERO);
    Digest a = cache.blob(10);
    Digest b = cache.blob(10);
    cache.clock.advance(Duration.ofDays(3));
    cache.pullBlob(b);
    long pulled = cache.blobs.entry(b).orElseThrow().lastPulledMillis();
    assertThat(cache.blobs.persistAccessTimes()).isEqualTo(1);
    cache.close();

    BlobStore reopened =
        new FileBlobStore(new StorageLayout(cache.properties), cache.clock, Duration.ZERO);
    assertThat(reopened.entry(b).orElseThrow().lastPulledMillis()).isEqualTo(pulled);
    assertThat(reopened.entry(a).orElseThrow().lastPulledMillis()).isLessThan(pulled);
    reopened.close();
  }

  @Test
  void startUpScanOf10000ManifestsAndBlobs() throws Exception {
    cache = new TestCache(root, 0, Duration.ZERO);
    int n = 10_000;
    for (int i = 0; i < n; i++) {
      byte[] body =
          ("{\"schemaVersion\":2,\"mediaType\":\"application/vnd.oci.image.manifest.v1+json\",\"n\":"
                  + i
                  + ",\"config\":{\"digest\":\"sha256:"
                  + "0".repeat(64)
                  + "\",\"size\":1},\"layers\":[]}")
              .getBytes();
      Digest d = Digest.sha256(body);
      Path p = cache.layout.manifest(d);
      Files.createDirectories(p.getParent());
      Files.write(p, body);
      Files.writeString(
          cache.layout.manifestType(d), "application/vnd.oci.image.manifest.v1+json\n");
      Path blob = cache.layout.blob(d);
      Files.createDirectories(blob.getParent());
      Files.write(blob, body);
    }
    long t0 = System.nanoTime();
    BlobStore blobs = new FileBlobStore(cache.layout, cache.clock, Duration.ZERO);
    long t1 = System.nanoTime();
    ManifestStore manifests = new ManifestStore(cache.layout, blobs, cache.properties, cache.clock);
    long t2 = System.nanoTime();
    System.out.printf(
        "start-up scan: %d blobs in %d ms, %d manifests in %d ms%n",
        blobs.count(), (t1 - t0) / 1_000_000, manifests.count(), (t2 - t1) / 1_000_000);
    assertThat(manifests.count()).isEqualTo(n);
    assertThat(blobs.count()).isEqualTo(n);
    blobs.close();
  }

  @Test
  void tagLinksAreListedWithNestedRepositoryNames() {
    cache = new TestCache(root, 0, Duration.ZERO);
    Digest m = cache.manifest(cache.blob(10));
    cache.tag("local", "a/b/c", "1.0", m);
    List<TagRef> tags = cache.manifests.allTags();
    assertThat(tags)
        .singleElement()
        .satisfies(
            t -> {
              assertThat(t.image()).isEqualTo("local/a/b/c:1.0");
              assertThat(t.digest()).isEqualTo(m);
            });
  }
}
