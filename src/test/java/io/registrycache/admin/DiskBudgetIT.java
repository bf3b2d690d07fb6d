package io.registrycache.admin;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import io.micrometer.core.instrument.Counter;
import io.micrometer.core.instrument.MeterRegistry;
import io.registrycache.storage.CacheCollector;
import io.registrycache.testsupport.CacheClient;
import io.registrycache.testsupport.CacheProperties;
import io.registrycache.testsupport.ManualCache;
import io.registrycache.testsupport.TestImages;
import io.registrycache.testsupport.TestImages.Image;
import io.registrycache.testsupport.UpstreamRegistryContainer;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Random;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import java.util.stream.Stream;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.springframework.beans.factory.annotation.Autowired;
import org.springframework.boot.test.context.SpringBootTest;
import org.springframework.boot.test.web.server.LocalManagementPort;
import org.springframework.boot.test.web.server.LocalServerPort;
import org.springframework.context.ApplicationContext;
import org.springframework.test.context.DynamicPropertyRegistry;
import org.springframework.test.context.DynamicPropertySource;

/**
 * Eviction under a small disk budget while several clients pull: nobody ever gets a wrong byte, and
 * after the janitor ran the disk holds no more than the budget plus one download.
 */
@SpringBootTest(webEnvironment = SpringBootTest.WebEnvironment.RANDOM_PORT)
class DiskBudgetIT {

  static final int LAYER = 200_000;
  static final long BUDGET = 600_000;

  @TempDir static Path storage;

  static final UpstreamRegistryContainer upstream = UpstreamRegistryContainer.started();

  @DynamicPropertySource
  static void properties(DynamicPropertyRegistry registry) {
    CacheProperties.cache(storage)
        .localUpstream(upstream.hostAndPort(), upstream::baseUrl)
        .set("registry-cache.storage.max-bytes", BUDGET)
        .set("registry-cache.storage.janitor-interval", "200ms")
        .set("registry-cache.storage.delete-grace", "300ms")
        .addTo(registry);
  }

  @LocalServerPort int port;
  @Autowired ApplicationContext context;
  @LocalManagementPort int managementPort;
  @Autowired MeterRegistry meters;
  @Autowired CacheCollector collector;

  @Test
  void clientsPullingUnderASmallBudgetAlwaysGetTheRightBytes() throws Exception {
    List<Image> images = new ArrayList<>();
    for (int i = 0; i < 5; i++) {
      images.add(
          upstream
              .pusher()
              .push(
                  TestImages.withLayers(
                      "budget/app" + i, "v1", TestImages.randomBytes(LAYER, 100 + i))));
    }
    CacheClient cache = CacheClient.onPort(port);
    AtomicLong maxStored = new AtomicLong();
    // the stored bytes sampled every 20 ms while the clients pull
    ScheduledExecutorService sampler = Executors.newSingleThreadScheduledExecutor();
    sampler.scheduleAtFixedRate(
        () -> maxStored.accumulateAndGet(collector.storedBytes(), Math::max),
        0,
        20,
        TimeUnit.MILLISECONDS);
    ExecutorService clients = Executors.newFixedThreadPool(3);
    List<Future<?>> done = new ArrayList<>();
    for (int c = 0; c < 3; c++) {
      long seed = c;
      done.add(
          clients.submit(
              () -> {
                List<Image> order = new ArrayList<>(images);
                Random random = new Random(seed);
                for (int round = 0; round < 3; round++) {
                  Collections.shuffle(order, random);
                  for (Image image : order) {
                    cache.pullAndVerify(image); // asserts every digest
                  }
                }
                return null;
              }));
    }
    for (Future<?> f : done) {
      f.get(120, TimeUnit.SECONDS);
    }
    clients.shutdown();
    sampler.shutdown();
    assertThat(sampler.awaitTermination(10, TimeUnit.SECONDS)).isTrue();
    ManualCache.awaitDownloadsCommitted(context);

    var janitor = CacheClient.onPort(managementPort).postJson("/actuator/cache/janitor", "{}");
    assertThat(janitor.statusCode()).isEqualTo(200);
    await("evicted files deleted once the delete grace is over")
        .atMost(Duration.ofSeconds(10))
        .until(
            () ->
                bytesUnder(storage.resolve("blobs")) + bytesUnder(storage.resolve("manifests"))
                    <= BUDGET + LAYER);

    long onDisk = bytesUnder(storage.resolve("blobs")) + bytesUnder(storage.resolve("manifests"));
    System.out.printf(
        "disk budget %d: stored %d after the janitor, %d on disk, at most %d while pulling%n",
        BUDGET, collector.storedBytes(), onDisk, maxStored.get());
    assertThat(collector.storedBytes()).isLessThanOrEqualTo((long) (BUDGET * 0.9));
    assertThat(onDisk).isLessThanOrEqualTo(BUDGET + LAYER);
    // while pulling: budget, plus a download per client that committed before the janitor ran
    assertThat(maxStored.get()).isLessThanOrEqualTo(BUDGET + 3L * LAYER);
    Counter evictions =
        meters.find("registry.cache.evictions").tags("kind", "blob", "reason", "budget").counter();
    assertThat(evictions).isNotNull();
    assertThat(evictions.count()).isGreaterThan(0);
    assertThat(meters.find("registry.cache.storage.budget.bytes").gauge().value())
        .isEqualTo(BUDGET);
  }

  private static long bytesUnder(Path dir) throws Exception {
    try (Stream<Path> files = Files.walk(dir)) {
      return files.filter(Files::isRegularFile).mapToLong(p -> p.toFile().length()).sum();
    }
  }
}
