package io.registrycache.it;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.fail;

import io.registrycache.RegistryCacheApplication;
import io.registrycache.testsupport.CacheClient;
import io.registrycache.testsupport.FakeUpstream;
import io.registrycache.testsupport.Sha256;
import io.registrycache.testsupport.TestImages;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Random;
import java.util.concurrent.atomic.AtomicBoolean;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;
import org.springframework.boot.test.context.SpringBootTest;
import org.springframework.boot.test.web.server.LocalServerPort;
import org.springframework.test.context.DynamicPropertyRegistry;
import org.springframework.test.context.DynamicPropertySource;

/**
 * An upstream that lies (200 with bytes that do not match the requested digest) or breaks off in
 * the middle of a blob. The cache must never hand out a clean wrong body, and must keep nothing:
 * no blob file, no manifest, no temp file; the next request fetches again.
 */
@SpringBootTest(
    classes = RegistryCacheApplication.class,
    webEnvironment = SpringBootTest.WebEnvironment.RANDOM_PORT)
class MisbehavingUpstreamIT {

  static final FakeUpstream fake = new FakeUpstream();
  static final Path storage = createStorage();

  @LocalServerPort int port;
  CacheClient cache;

  @DynamicPropertySource
  static void properties(DynamicPropertyRegistry registry) {
    registry.add("registry-cache.storage.path", storage::toString);
    registry.add("registry-cache.default-upstream", () -> "local");
    registry.add("registry-cache.upstreams.local.host", () -> "liar.test");
    registry.add("registry-cache.upstreams.local.url", fake::baseUrl);
    registry.add("registry-cache.upstreams.local.read-timeout", () -> "5s");
    registry.add("management.server.port", () -> "0");
  }

  @BeforeEach
  void client() {
    cache = CacheClient.onPort(port);
  }

  @AfterAll
  static void stopFake() {
    fake.close();
  }

  /** What a client saw: a response, or an aborted connection. */
  record Outcome(HttpResponse<byte[]> response, IOException aborted) {}

  Outcome fetch(String path) {
    try {
      return new Outcome(cache.sendOrThrow("GET", path, null), null);
    } catch (IOException e) {
      return new Outcome(null, e);
    }
  }

  @ParameterizedTest(name = "{0} bytes")
  @ValueSource(ints = {1_000, 3 * 1024 * 1024})
  void lyingBlobIsNeverServedCleanlyAndNotStored(int size) {
    byte[] real = random(size, 1);
    byte[] lie = random(size, 2);
    String digest = Sha256.digest(real);
    String path = "/v2/liar/blob/blobs/" + digest;
    fake.route(path, ex -> FakeUpstream.send(ex, 200, "application/octet-stream", lie, digest));

    Outcome first = fetch(path);
    assertNotACleanWrongBody(first, digest);
    long upstreamAfterFirst = fake.count("GET", path);
    assertThat(upstreamAfterFirst).isPositive();

    assertNothingStored(digest, lie);

    Outcome second = fetch(path);
    assertNotACleanWrongBody(second, digest);
    assertThat(fake.count("GET", path))
        .as("nothing was cached, so the second request goes upstream again")
        .isGreaterThan(upstreamAfterFirst);
    assertNothingStored(digest, lie);
  }

  @Test
  void lyingManifestByDigestIsRejectedAndNotStored() {
    byte[] real = manifest("real");
    byte[] lie = manifest("lie");
    String digest = Sha256.digest(real);
    String path = "/v2/liar/manifest/manifests/" + digest;
    fake.route(path, ex -> FakeUpstream.send(ex, 200, TestImages.OCI_MANIFEST, lie, digest));

    Outcome first = fetch(path);
    if (first.response() != null) {
      assertThat(first.response().statusCode())
          .as("a manifest whose bytes do not match the requested digest: " + CacheClient.describe(first.response()))
          .isGreaterThanOrEqualTo(400);
      assertThat(first.response().body()).isNotEqualTo(lie);
    }
    long afterFirst = fake.count(path);
    assertThat(afterFirst).isPositive();
    assertThat(TestFiles.filesWithContent(storage, lie)).as("the lying manifest is not kept").isEmpty();

    Outcome second = fetch(path);
    if (second.response() != null) {
      assertThat(second.response().statusCode()).isGreaterThanOrEqualTo(400);
    }
    assertThat(fake.count(path)).as("not cached: asked upstream again").isGreaterThan(afterFirst);
    assertThat(TestFiles.filesWithContent(storage, lie)).isEmpty();
    assertNoTempFiles();
  }

  @Test
  void upstreamClosingMidBlobAbortsTheClientAndTheNextRequestRefetches() {
    byte[] blob = random(2 * 1024 * 1024, 3);
    String digest = Sha256.digest(blob);
    String path = "/v2/liar/cut/blobs/" + digest;
    AtomicBoolean honest = new AtomicBoolean(false);
    fake.route(
        path,
        ex -> {
          if (honest.get()) {
            FakeUpstream.send(ex, 200, "application/octet-stream", blob, digest);
          } else {
            FakeUpstream.sendTruncated(ex, "application/octet-stream", blob, blob.length / 2, digest);
          }
        });

    Outcome first = fetch(path);
    if (first.aborted() == null) {
      HttpResponse<byte[]> r = first.response();
      assertThat(r.statusCode())
          .as("a cut upstream body must reach the client as an aborted response or an error, got "
              + r.statusCode() + " with " + r.body().length + " bytes")
          .isNotEqualTo(200)
          .isGreaterThanOrEqualTo(500);
    }
    long afterFirst = fake.count("GET", path);
    assertThat(afterFirst).isPositive();
    assertNothingStored(digest, blob);

    honest.set(true);
    Outcome second = fetch(path);
    assertThat(second.aborted()).as("second request, upstream healthy again").isNull();
    assertThat(second.response().statusCode()).as(CacheClient.describe(second.response())).isEqualTo(200);
    assertThat(Sha256.digest(second.response().body())).isEqualTo(digest);
    assertThat(fake.count("GET", path)).as("the second request refetched").isGreaterThan(afterFirst);
    assertThat(TestFiles.eventually(5_000, () -> Files.exists(AbstractCacheIT.blobFile(storage, digest))))
        .as("the good copy is cached")
        .isTrue();
  }

  static void assertNotACleanWrongBody(Outcome outcome, String digest) {
    if (outcome.aborted() != null) {
      return; // an aborted connection is the right answer once the body has started
    }
    HttpResponse<byte[]> response = outcome.response();
    if (response.statusCode() == 200) {
      assertThat(Sha256.digest(response.body()))
          .as("a 200 with a complete body must be the requested blob, never the upstream's lie")
          .isEqualTo(digest);
      fail("the lying upstream's blob was served cleanly");
    }
    assertThat(response.statusCode()).as(CacheClient.describe(response)).isGreaterThanOrEqualTo(400);
  }

  void assertNothingStored(String digest, byte[] content) {
    assertNoTempFiles();
    assertThat(AbstractCacheIT.blobFile(storage, digest)).doesNotExist();
    assertThat(TestFiles.filesWithContent(storage, content)).isEmpty();
  }

  static void assertNoTempFiles() {
    Path tmp = storage.resolve("tmp");
    boolean clean = TestFiles.eventually(5_000, () -> TestFiles.regularFiles(tmp).isEmpty());
    assertThat(clean).as("temp files left: %s", TestFiles.regularFiles(tmp)).isTrue();
  }

  static byte[] random(int size, long seed) {
    byte[] bytes = new byte[size];
    new Random(seed * 7919 + size + TestImages.RUN_ID.hashCode()).nextBytes(bytes);
    return bytes;
  }

  static byte[] manifest(String id) {
    String json =
        "{\n   \"schemaVersion\": 2,\n   \"mediaType\": \"" + TestImages.OCI_MANIFEST + "\",\n"
            + "   \"config\": {\"mediaType\": \"" + TestImages.OCI_CONFIG + "\", \"digest\": \""
            + Sha256.digest(id.getBytes(StandardCharsets.UTF_8)) + "\", \"size\": " + id.length() + "},\n"
            + "   \"layers\": [],\n   \"annotations\": {\"id\": \"" + id + TestImages.RUN_ID + "\"}\n}\n";
    return json.getBytes(StandardCharsets.UTF_8);
  }

  static Path createStorage() {
    try {
      Path dir = Files.createTempDirectory("registry-cache-liar-");
      Runtime.getRuntime().addShutdownHook(new Thread(() -> TestFiles.deleteRecursively(dir)));
      return dir;
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
  }
}
