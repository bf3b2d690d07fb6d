package io.registrycache.startup;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.List;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.stream.Stream;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import org.springframework.boot.SpringApplication;
import org.springframework.boot.web.server.context.WebServerApplicationContext;
import org.springframework.context.ConfigurableApplicationContext;
import reactor.core.publisher.Flux;
import reactor.core.publisher.Mono;
import reactor.netty.Connection;
import reactor.netty.http.client.HttpClient;
import reactor.netty.http.client.HttpClientResponse;
import reactor.netty.resources.ConnectionProvider;

/**
 * The training run of the JVM's AOT cache (JEP 483, 514, 515; JDK 25): started with {@code
 * -Dregistry-cache.aot-training=true} and {@code -XX:AOTCacheOutput=<file>}, the service starts as
 * a real start does (both servers listening), is pulled through over its own pull port like a cache
 * meeting its first clients, then stops; the JVM then writes the classes it loaded and linked and
 * the method profiles it gathered into {@code <file>}. A start with {@code -XX:AOTCache=<file>}
 * (same JDK, JVM options and class path) maps them instead of parsing jars and profiling from
 * scratch. The image build makes the image's cache so (docker/aot-cache.sh); for {@code java -jar},
 * docs/aot-cache.md gives the command.
 *
 * <p>The pulls ({@value #IMAGES} synthetic images of a config and two layers from {@link
 * TrainingUpstream}s on loopback, {@value #CONCURRENCY} at a time): each image cold (manifest by
 * tag, every blob), then warm {@value #WARM_ROUNDS} times (manifest {@code HEAD} by tag and {@code
 * GET} by digest, every blob, a {@code Range} request, a blob {@code HEAD}), by turns in the
 * in-path, {@code ?ns=} and default-upstream forms of a name; one image with a 3 MiB layer (a fill
 * over several write batches); the OCI error answers (unknown manifest and blob, an invalid name);
 * the management port's health, probes and Prometheus scrape. The service runs on free ports with a
 * throw-away file-system cache in a temporary folder, offline from everything but the loopback
 * upstreams, unclustered, with authentication, rate limits and preloading off: it touches no other
 * process's storage, ports, peers or upstreams. Command-line arguments are ignored; environment
 * settings apply where the training does not set its own.
 */
public final class AotTraining {

  private static final Logger log = LoggerFactory.getLogger(AotTraining.class);

  /** The system property that makes a start the AOT cache's training run. */
  public static final String PROPERTY = "registry-cache.aot-training";

  /** Synthetic images pulled. */
  static final int IMAGES = 120;

  /** Pulls at once, as a few clients would. */
  static final int CONCURRENCY = 4;

  /** Warm pulls of each image after its cold one. */
  static final int WARM_ROUNDS = 3;

  /** Longest the pulls may take before the run gives up (exit status 1). */
  static final Duration TIME_LIMIT = Duration.ofMinutes(5);

  /** Layer sizes of each synthetic image, bytes: one under a read buffer, one over several. */
  private static final int[] LAYER_BYTES = {2 << 10, 160 << 10};

  private static final String MANIFEST_ACCEPT =
      "application/vnd.oci.image.index.v1+json, "
          + "application/vnd.oci.image.manifest.v1+json, application/vnd.docker.distribution.manifest.v2+json, "
          + "application/vnd.docker.distribution.manifest.list.v2+json";

  private AotTraining() {}

  /** True when this JVM was started for the AOT cache's training run ({@value #PROPERTY}). */
  public static boolean requested() {
    return Boolean.getBoolean(PROPERTY);
  }

  /**
   * Starts {@code application} with the training settings, pulls through it, stops it.
   *
   * @return the exit status: 0 when every pull answered as expected, 1 otherwise (the cache is
   *     written all the same; a build treats it as failed)
   */
  public static int run(Class<?> application) throws IOException {
    long started = System.nanoTime();
    Path work = Files.createTempDirectory("registry-cache-aot-training-");
    try (TrainingUpstream small = TrainingUpstream.start(0, IMAGES, LAYER_BYTES);
        TrainingUpstream large = TrainingUpstream.start(0)) {
      String[] settings = {
        "--server.port=0",
        "--management.server.port=0",
        "--registry-cache.storage.type=filesystem",
        "--registry-cache.storage.path=" + work.resolve("cache"),
        "--registry-cache.upstreams.aot-training.url=http://127.0.0.1:" + small.port(),
        "--registry-cache.upstreams.aot-training-large.url=http://127.0.0.1:" + large.port(),
        "--registry-cache.default-upstream=aot-training",
        "--registry-cache.auth.enabled=false",
        "--registry-cache.rate-limit.enabled=false",
        "--registry-cache.cluster.peers=",
        "--registry-cache.cluster.peers-dns=",
      };
      ConfigurableApplicationContext context = SpringApplication.run(application, settings);
      int status;
      try {
        int port = ((WebServerApplicationContext) context).getWebServer().getPort();
        String management =
            context.getEnvironment().getProperty("local.management.port", Integer.toString(port));
        status = pull(port, Integer.parseInt(management), small, large);
      } finally {
        // as a served process stops (its shutdown hook closes the context)
        context.close();
      }
      log.info(
          "AOT cache training: {} in {} ms; the JVM writes the cache as it exits",
          status == 0 ? "done" : "some pulls failed",
          Duration.ofNanos(System.nanoTime() - started).toMillis());
      return status;
    } finally {
      delete(work);
    }
  }

  /**
   * Deletes {@code folder} and what it holds, as the store's janitor walks it ({@link Files#walk}).
   */
  private static void delete(Path folder) throws IOException {
    try (Stream<Path> paths = Files.walk(folder)) {
      for (Path path : paths.sorted(Comparator.reverseOrder()).toList()) {
        Files.deleteIfExists(path);
      }
    }
  }

  private static int pull(
      int port, int managementPort, TrainingUpstream small, TrainingUpstream large) {
    ConnectionProvider connections = ConnectionProvider.create("aot-training", CONCURRENCY + 1);
    HttpClient client = HttpClient.create(connections).baseUrl("http://127.0.0.1:" + port);
    AtomicInteger failures = new AtomicInteger();
    try {
      String smallHost = "127.0.0.1:" + small.port();
      Flux.range(0, IMAGES)
          .flatMap(
              i -> {
                Image image =
                    new Image(
                        name(i % 3, smallHost),
                        query(i % 3, smallHost),
                        TrainingUpstream.tag(i),
                        small.blobDigests(i));
                Mono<Void> warm =
                    Flux.range(0, WARM_ROUNDS).concatMap(r -> warm(client, image, failures)).then();
                return cold(client, image, failures).then(warm);
              },
              CONCURRENCY)
          .then(
              Mono.defer(
                  () -> {
                    String largeHost = "127.0.0.1:" + large.port();
                    Image image =
                        new Image(
                            largeHost + "/" + TrainingUpstream.REPOSITORY,
                            "",
                            TrainingUpstream.TAG,
                            large.blobDigests());
                    return cold(client, image, failures).then(warm(client, image, failures));
                  }))
          .then(errors(client, failures))
          .then(
              management(
                  HttpClient.create(connections).baseUrl("http://127.0.0.1:" + managementPort),
                  failures))
          .block(TIME_LIMIT);
    } catch (RuntimeException e) {
      log.warn("AOT cache training: the pulls stopped: {}", e.toString());
      failures.incrementAndGet();
    } finally {
      connections.disposeLater().block(Duration.ofSeconds(10));
    }
    if (failures.get() > 0) {
      log.warn("AOT cache training: {} requests did not answer as expected", failures.get());
    }
    return failures.get() == 0 ? 0 : 1;
  }

  /** A synthetic image as a client names it: repository path, query and tag, its blobs. */
  private record Image(String repository, String query, String tag, List<String> blobs) {
    String manifest(String reference) {
      return "/v2/" + repository + "/manifests/" + reference + query;
    }

    String blob(String digest) {
      return "/v2/" + repository + "/blobs/" + digest + query;
    }
  }

  /**
   * The name form {@code mode}: 0 in-path ({@code <host>/<repository>}), 1 {@code ?ns=}, 2 the
   * default upstream.
   */
  private static String name(int mode, String host) {
    return mode == 0 ? host + "/" + TrainingUpstream.REPOSITORY : TrainingUpstream.REPOSITORY;
  }

  private static String query(int mode, String host) {
    return mode == 1 ? "?ns=" + host : "";
  }

  /** The manifest by tag, then every blob: a first pull. */
  private static Mono<Void> cold(HttpClient client, Image image, AtomicInteger failures) {
    return get(client, image.manifest(image.tag()), MANIFEST_ACCEPT, null, 200, failures)
        .thenMany(
            Flux.fromIterable(image.blobs())
                .concatMap(d -> get(client, image.blob(d), null, null, 200, failures)))
        .then();
  }

  /** A pull of a cached image as runtimes make it, a Range request and a blob HEAD. */
  private static Mono<Void> warm(HttpClient client, Image image, AtomicInteger failures) {
    String layer = image.blobs().get(image.blobs().size() - 1);
    return head(client, image.manifest(image.tag()), MANIFEST_ACCEPT, 200, failures)
        .then(get(client, image.manifest(image.tag()), MANIFEST_ACCEPT, null, 200, failures))
        .thenMany(
            Flux.fromIterable(image.blobs())
                .concatMap(d -> get(client, image.blob(d), null, null, 200, failures)))
        .then(get(client, image.blob(layer), null, "bytes=100-1123", 206, failures))
        .then(head(client, image.blob(layer), null, 200, failures));
  }

  /** The OCI error answers a client meets: unknown manifest, unknown blob, an invalid name. */
  private static Mono<Void> errors(HttpClient client, AtomicInteger failures) {
    List<Mono<Void>> requests = new ArrayList<>();
    for (int i = 0; i < 20; i++) {
      requests.add(
          get(
              client,
              "/v2/" + TrainingUpstream.REPOSITORY + "/manifests/unknown-" + i,
              MANIFEST_ACCEPT,
              null,
              404,
              failures));
      requests.add(
          head(
              client,
              "/v2/"
                  + TrainingUpstream.REPOSITORY
                  + "/blobs/sha256:"
                  + "0".repeat(63)
                  + (char) ('a' + i % 6),
              null,
              404,
              failures));
      requests.add(
          get(client, "/v2/Invalid..Name/manifests/latest", MANIFEST_ACCEPT, null, 400, failures));
      requests.add(get(client, "/v2/", null, null, 200, failures));
    }
    return Flux.concat(requests).then();
  }

  /** What probes and Prometheus ask the management port. */
  private static Mono<Void> management(HttpClient client, AtomicInteger failures) {
    List<Mono<Void>> requests = new ArrayList<>();
    for (int i = 0; i < 5; i++) {
      requests.add(get(client, "/actuator/health/liveness", null, null, 200, failures));
      requests.add(get(client, "/actuator/health/readiness", null, null, 200, failures));
      requests.add(get(client, "/actuator/prometheus", null, null, 200, failures));
    }
    return Flux.concat(requests).then();
  }

  private static Mono<Void> get(
      HttpClient client,
      String uri,
      String accept,
      String range,
      int expected,
      AtomicInteger failures) {
    return client
        .headers(
            h -> {
              if (accept != null) {
                h.set("Accept", accept);
              }
              if (range != null) {
                h.set("Range", range);
              }
            })
        .get()
        .uri(uri)
        .responseConnection(
            (response, connection) -> drain(uri, response, connection, expected, failures))
        .then();
  }

  private static Mono<Void> head(
      HttpClient client, String uri, String accept, int expected, AtomicInteger failures) {
    return client
        .headers(
            h -> {
              if (accept != null) {
                h.set("Accept", accept);
              }
            })
        .head()
        .uri(uri)
        .responseConnection(
            (response, connection) -> drain(uri, response, connection, expected, failures))
        .then();
  }

  /**
   * Reads and drops the body and checks the status, the way the service's upstream client reads an
   * upstream's answer ({@code responseConnection}, {@code receive()}): the training loads and
   * profiles that code, not another reader's.
   */
  private static Mono<Void> drain(
      String uri,
      HttpClientResponse response,
      Connection connection,
      int expected,
      AtomicInteger failures) {
    return connection
        .inbound()
        .receive()
        .then(Mono.fromRunnable(() -> check(uri, response.status().code(), expected, failures)));
  }

  private static void check(String uri, int status, int expected, AtomicInteger failures) {
    if (status != expected && failures.getAndIncrement() < 5) {
      log.warn("AOT cache training: {} answered {}, expected {}", uri, status, expected);
    }
  }
}
