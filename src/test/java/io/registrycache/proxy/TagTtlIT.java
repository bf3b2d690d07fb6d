package io.registrycache.proxy;

import static io.registrycache.testsupport.CacheClient.describe;
import static org.assertj.core.api.Assertions.assertThat;

import io.registrycache.it.AbstractCacheIT;
import io.registrycache.testsupport.CacheClient;
import io.registrycache.testsupport.CacheProperties;
import io.registrycache.testsupport.ManualCache;
import io.registrycache.testsupport.TestCache;
import io.registrycache.testsupport.TestImages;
import io.registrycache.testsupport.TestImages.Image;
import io.registrycache.testsupport.UpstreamRegistryContainer;
import java.net.http.HttpResponse;
import java.nio.file.Path;
import java.time.Duration;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * {@code registry-cache.manifests.tag-ttl}: a cached tag is served without asking the upstream
 * until the TTL runs out; after that a tag moved upstream is seen. Digests never expire. The
 * service's clock is the test's, moved by hand: no waiting.
 */
class TagTtlIT {

  static final UpstreamRegistryContainer upstream = AbstractCacheIT.upstream;
  static final Duration TTL = Duration.ofMinutes(5);

  @TempDir Path storage;

  @Test
  void aMovedTagIsSeenOnlyAfterTheTtl() {
    String repository = TestImages.uniqueRepository("ttl");
    Image first = upstream.pusher().push(TestImages.smallOci(repository, "moving"));
    Image second = TestImages.dockerSchema2(repository, "moving");
    String tagPath = "/v2/" + repository + "/manifests/moving";
    TestCache.MutableClock clock = new TestCache.MutableClock();

    try (ManualCache service =
        ManualCache.start(
            CacheProperties.cache(storage)
                .localUpstream(upstream::baseUrl)
                .set("registry-cache.manifests.tag-ttl", TTL.toMillis() + "ms"),
            clock)) {
      CacheClient cache = service.client();

      CacheClient.assertManifest(cache.getManifest(tagPath), first.manifest());
      upstream.pusher().push(second); // the tag moves upstream
      upstream.syncLogs();
      long upstreamBefore = upstream.countRequestsUnder("/v2/" + repository + "/manifests/");

      clock.advance(TTL.minusMillis(1));
      CacheClient.assertManifest(cache.getManifest(tagPath), first.manifest());
      upstream.syncLogs();
      assertThat(upstream.countRequestsUnder("/v2/" + repository + "/manifests/"))
          .as("within the TTL the tag is not revalidated")
          .isEqualTo(upstreamBefore);

      clock.advance(Duration.ofMillis(2));
      HttpResponse<byte[]> afterTtl = cache.getManifest(tagPath);
      assertThat(afterTtl.statusCode()).as(describe(afterTtl)).isEqualTo(200);
      CacheClient.assertManifest(afterTtl, second.manifest());
      CacheClient.assertHeadOf(cache.headManifest(tagPath), second.manifest());

      // the old manifest is still there by digest
      CacheClient.assertManifest(
          cache.getManifest("/v2/" + repository + "/manifests/" + first.manifest().digest()),
          first.manifest());
    }
  }
}
