package io.registrycache.proxy;

import static org.assertj.core.api.Assertions.assertThat;

import io.registrycache.config.RegistryCacheProperties;
import io.registrycache.testsupport.TestUpstreams;
import java.util.Map;
import org.junit.jupiter.api.Test;

/**
 * How many prefetch fills run at once per upstream: {@code max-in-flight}, at most half the
 * upstream's pool.
 */
class PrefetchSlotsTest {

  private static Prefetcher prefetcher(String maxInFlight) {
    return new Prefetcher(
        null,
        RegistryCacheProperties.bind(
            maxInFlight == null
                ? Map.of()
                : Map.of("registry-cache.blobs.prefetch.max-in-flight", maxInFlight)));
  }

  @Test
  void theDefaultIs32OnAnUpstreamOfTheDefaultPool() {
    assertThat(prefetcher(null).slots(TestUpstreams.upstream("a", "http://127.0.0.1:9", s -> {})))
        .isEqualTo(32);
  }

  @Test
  void halfOfASmallerPoolStaysFreeForClients() {
    Prefetcher prefetcher = prefetcher("32");
    assertThat(
            prefetcher.slots(
                TestUpstreams.upstream(
                    "a", "http://127.0.0.1:9", s -> s.put("max-concurrent-requests", "10"))))
        .isEqualTo(5);
    assertThat(
            prefetcher.slots(
                TestUpstreams.upstream(
                    "a", "http://127.0.0.1:9", s -> s.put("max-concurrent-requests", "1"))))
        .isEqualTo(1);
  }

  @Test
  void aSmallerSettingIsKept() {
    assertThat(prefetcher("2").slots(TestUpstreams.upstream("a", "http://127.0.0.1:9", s -> {})))
        .isEqualTo(2);
  }
}
