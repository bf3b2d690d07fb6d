package io.registrycache.proxy;

import static org.assertj.core.api.Assertions.assertThat;

import io.registrycache.it.AbstractCacheIT;
import io.registrycache.testsupport.Sha256;
import io.registrycache.testsupport.TestImages;
import io.registrycache.testsupport.TestImages.Blob;
import io.registrycache.testsupport.TestImages.Image;
import java.io.InputStream;
import java.net.URI;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;

/** Concurrent cold requests for one blob are served by a single upstream fetch. */
class SingleFlightIT extends AbstractCacheIT {

  static final int CLIENTS = 20;
  static final int LAYER_BYTES = 40 * 1024 * 1024;

  record Result(int status, String digest, String header) {}

  @Test
  void twentyConcurrentColdRequestsCauseOneUpstreamGet() throws Exception {
    Image image =
        upstream
            .pusher()
            .push(
                TestImages.withLargeLayer(
                    TestImages.uniqueRepository("flight"), "v1", LAYER_BYTES));
    Blob blob = image.largestLayer();
    String path = "/v2/" + image.repository() + "/blobs/" + blob.digest();
    upstream.syncLogs();
    assertThat(upstream.countRequests("GET", path)).isZero();

    ExecutorService pool = Executors.newFixedThreadPool(CLIENTS);
    try {
      CountDownLatch go = new CountDownLatch(1);
      List<Future<Result>> futures = new ArrayList<>();
      for (int i = 0; i < CLIENTS; i++) {
        futures.add(
            pool.submit(
                () -> {
                  go.await();
                  HttpRequest request =
                      HttpRequest.newBuilder(URI.create(cache.baseUrl() + path))
                          .timeout(Duration.ofSeconds(120))
                          .build();
                  HttpResponse<InputStream> response =
                      cache.http().send(request, HttpResponse.BodyHandlers.ofInputStream());
                  String digest = Sha256.digest(response.body());
                  return new Result(
                      response.statusCode(),
                      digest,
                      response.headers().firstValue("Docker-Content-Digest").orElse(null));
                }));
      }
      go.countDown();
      for (Future<Result> future : futures) {
        Result result = future.get(180, TimeUnit.SECONDS);
        assertThat(result.status()).isEqualTo(200);
        assertThat(result.digest())
            .as("every client gets the whole, right blob")
            .isEqualTo(blob.digest());
        assertThat(result.header()).isEqualTo(blob.digest());
      }
    } finally {
      pool.shutdownNow();
    }

    upstream.syncLogs();
    assertThat(upstream.countRequests("GET", path))
        .as("upstream GETs for %d concurrent cold requests", CLIENTS)
        .isEqualTo(1);
    awaitDownloadsCommitted();
    assertThat(blobFile(storage, blob.digest())).hasSize(blob.size());
  }
}
