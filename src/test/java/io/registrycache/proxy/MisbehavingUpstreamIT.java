package io.registrycache.proxy;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.fail;

import com.sun.net.httpserver.HttpExchange;
import io.registrycache.RegistryCacheApplication;
import io.registrycache.it.AbstractCacheIT;
import io.registrycache.testsupport.CacheClient;
import io.registrycache.testsupport.CacheProperties;
import io.registrycache.testsupport.ScriptedHttp;
import io.registrycache.testsupport.Sha256;
import io.registrycache.testsupport.TestFiles;
import io.registrycache.testsupport.TestImages;
import java.io.IOException;
import java.io.OutputStream;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Arrays;
import java.util.List;
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
 * the middle of a blob. The cache must never hand out a clean wrong body, and must keep nothing: no
 * blob file, no manifest, no temp file; the next request fetches again.
 */
@SpringBootTest(
    classes = RegistryCacheApplication.class,
    webEnvironment = SpringBootTest.WebEnvironment.RANDOM_PORT)
class MisbehavingUpstreamIT {

  static final ScriptedHttp fake = new ScriptedHttp();
  static final Path storage = TestFiles.tempDirectory("registry-cache-liar-");

  @LocalServerPort int port;
  CacheClient cache;

  @DynamicPropertySource
  static void properties(DynamicPropertyRegistry registry) {
    CacheProperties.cache(storage)
        .localUpstream("liar.test", fake::baseUrl)
        .upstream("read-timeout", "5s")
        .addTo(registry);
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

  Outcome fetch(String path, String... headers) {
    try {
      return new Outcome(cache.sendOrThrow("GET", path, null, headers), null);
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
    fake.route(path, ex -> ScriptedHttp.send(ex, 200, "application/octet-stream", lie, digest));

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
    fake.route(path, ex -> ScriptedHttp.send(ex, 200, TestImages.OCI_MANIFEST, lie, digest));

    Outcome first = fetch(path);
    if (first.response() != null) {
      assertThat(first.response().statusCode())
          .as(
              "a manifest whose bytes do not match the requested digest: "
                  + CacheClient.describe(first.response()))
          .isGreaterThanOrEqualTo(400);
      assertThat(first.response().body()).isNotEqualTo(lie);
    }
    long afterFirst = fake.count(path);
    assertThat(afterFirst).isPositive();
    assertThat(TestFiles.filesWithContent(storage, lie))
        .as("the lying manifest is not kept")
        .isEmpty();

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
            ScriptedHttp.send(ex, 200, "application/octet-stream", blob, digest);
          } else {
            ScriptedHttp.sendTruncated(
                ex, "application/octet-stream", blob, blob.length / 2, digest);
          }
        });

    Outcome first = fetch(path);
    if (first.aborted() == null) {
      HttpResponse<byte[]> r = first.response();
      assertThat(r.statusCode())
          .as(
              "a cut upstream body must reach the client as an aborted response or an error, got "
                  + r.statusCode()
                  + " with "
                  + r.body().length
                  + " bytes")
          .isNotEqualTo(200)
          .isGreaterThanOrEqualTo(500);
    }
    long afterFirst = fake.count("GET", path);
    assertThat(afterFirst).isPositive();
    assertNothingStored(digest, blob);

    honest.set(true);
    Outcome second = fetch(path);
    assertThat(second.aborted()).as("second request, upstream healthy again").isNull();
    assertThat(second.response().statusCode())
        .as(CacheClient.describe(second.response()))
        .isEqualTo(200);
    assertThat(Sha256.digest(second.response().body())).isEqualTo(digest);
    assertThat(fake.count("GET", path))
        .as("the second request refetched")
        .isGreaterThan(afterFirst);
    assertThat(
            TestFiles.eventually(
                5_000, () -> Files.exists(AbstractCacheIT.blobFile(storage, digest))))
        .as("the good copy is cached")
        .isTrue();
  }

  /** Issue 7.3: a range ends cleanly, so it must never be cut from bytes not yet verified. */
  @Test
  void rangeOfABlobStillArrivingIsServedOnlyFromVerifiedBytes() {
    byte[] real = random(1024 * 1024, 4);
    byte[] lie = random(1024 * 1024, 5);
    String digest = Sha256.digest(real);
    String liePath = "/v2/liar/range-lie/blobs/" + digest;
    fake.route(liePath, ex -> sendSlowly(ex, lie, digest));

    Outcome lied = fetch(liePath, "Range", "bytes=0-9");
    if (lied.aborted() == null) {
      HttpResponse<byte[]> r = lied.response();
      assertThat(r.statusCode())
          .as(
              "bytes of a blob that failed its digest check were served: "
                  + CacheClient.describe(r))
          .isGreaterThanOrEqualTo(500);
    }
    assertNothingStored(digest, lie);

    String honestPath = "/v2/liar/range-honest/blobs/" + digest;
    fake.route(honestPath, ex -> sendSlowly(ex, real, digest));
    Outcome honest = fetch(honestPath, "Range", "bytes=0-9");
    assertThat(honest.aborted()).isNull();
    assertThat(honest.response().statusCode())
        .as(CacheClient.describe(honest.response()))
        .isEqualTo(206);
    assertThat(honest.response().body()).isEqualTo(Arrays.copyOf(real, 10));
    assertThat(honest.response().headers().firstValue("ETag")).hasValue("\"" + digest + "\"");
    assertThat(honest.response().headers().firstValue("Content-Range"))
        .hasValue("bytes 0-9/" + real.length);
  }

  /**
   * Issue 7.7: a client whose Accept leaves out the manifest's media type gets MANIFEST_UNKNOWN
   * (404), as from the distribution registry; its narrow Accept never reaches the upstream, which
   * here answers 400 to anything but the full list.
   */
  @Test
  void manifestOfATypeTheClientDoesNotAcceptIsManifestUnknownNot502() {
    byte[] body = manifest("negotiate");
    String digest = Sha256.digest(body);
    String warm = "/v2/liar/negotiate/manifests/warm";
    String cold = "/v2/liar/negotiate/manifests/cold";
    ScriptedHttp.Responder strict =
        ex -> {
          String accept =
              String.join(",", ex.getRequestHeaders().getOrDefault("Accept", List.of()));
          if (accept.contains(TestImages.OCI_MANIFEST)) {
            ScriptedHttp.send(ex, 200, TestImages.OCI_MANIFEST, body, digest);
          } else {
            byte[] error =
                "{\"errors\":[{\"code\":\"MANIFEST_INVALID\",\"message\":\"unsupported accept\"}]}"
                    .getBytes(StandardCharsets.UTF_8);
            ScriptedHttp.send(ex, 400, "application/json", error, null);
          }
        };
    fake.route(warm, strict);
    fake.route(cold, strict);
    String dockerOnly = "application/vnd.docker.distribution.manifest.v2+json";

    assertThat(cache.getManifest(warm).statusCode()).isEqualTo(200);
    long upstreamAfterWarm = fake.count(warm);
    HttpResponse<byte[]> narrow = cache.get(warm, "Accept", dockerOnly);
    assertThat(narrow.statusCode()).as(CacheClient.describe(narrow)).isEqualTo(404);
    assertThat(CacheClient.errorCode(narrow)).isEqualTo("MANIFEST_UNKNOWN");
    assertThat(fake.count(warm))
        .as("the cached tag answers; the upstream is not asked")
        .isEqualTo(upstreamAfterWarm);

    HttpResponse<byte[]> coldNarrow = cache.get(cold, "Accept", dockerOnly);
    assertThat(coldNarrow.statusCode()).as(CacheClient.describe(coldNarrow)).isEqualTo(404);
    assertThat(CacheClient.errorCode(coldNarrow)).isEqualTo("MANIFEST_UNKNOWN");
    long upstreamAfterCold = fake.count(cold);
    HttpResponse<byte[]> wide = cache.get(cold, "Accept", "application/*;q=0.5, " + dockerOnly);
    assertThat(wide.statusCode()).as(CacheClient.describe(wide)).isEqualTo(200);
    assertThat(wide.body()).isEqualTo(body);
    assertThat(wide.headers().firstValue("Content-Type")).hasValue(TestImages.OCI_MANIFEST);
    assertThat(fake.count(cold))
        .as("the cold pull stored it for every client")
        .isEqualTo(upstreamAfterCold);
  }

  /** Issue 7.13: a Content-Type that is no manifest media type (a web page) is not a manifest. */
  @Test
  void manifestServedAsAWebPageIsRejectedAndNotStored() {
    String json =
        "{\"schemaVersion\": 2, \"config\": {\"mediaType\": \""
            + TestImages.OCI_CONFIG
            + "\", \"digest\": \""
            + Sha256.digest("html".getBytes(StandardCharsets.UTF_8))
            + "\", \"size\": 4}, \"layers\": [],"
            + " \"annotations\": {\"id\": \"html"
            + TestImages.RUN_ID
            + "\"}}";
    byte[] body = json.getBytes(StandardCharsets.UTF_8);
    String path = "/v2/liar/html/manifests/latest";
    fake.route(
        path,
        ex -> ScriptedHttp.send(ex, 200, "text/html; charset=utf-8", body, Sha256.digest(body)));

    HttpResponse<byte[]> response = cache.getManifest(path);
    assertThat(response.statusCode()).as(CacheClient.describe(response)).isEqualTo(502);
    assertThat(CacheClient.errorCode(response)).isEqualTo("MANIFEST_INVALID");
    assertThat(TestFiles.filesWithContent(storage, body)).as("nothing kept").isEmpty();
  }

  /** Sends the first 64 KiB, waits, then the rest: the cache has started serving by then. */
  static void sendSlowly(HttpExchange ex, byte[] body, String digest) throws IOException {
    if ("HEAD".equals(ex.getRequestMethod())) {
      ScriptedHttp.send(ex, 200, "application/octet-stream", body, digest);
      return;
    }
    ex.getResponseHeaders().set("Content-Type", "application/octet-stream");
    ex.getResponseHeaders().set("Docker-Content-Digest", digest);
    ex.sendResponseHeaders(200, body.length);
    try (OutputStream out = ex.getResponseBody()) {
      out.write(body, 0, 64 * 1024);
      out.flush();
      Thread.sleep(1_500);
      out.write(body, 64 * 1024, body.length - 64 * 1024);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    }
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
    assertThat(response.statusCode())
        .as(CacheClient.describe(response))
        .isGreaterThanOrEqualTo(400);
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
        "{\n   \"schemaVersion\": 2,\n   \"mediaType\": \""
            + TestImages.OCI_MANIFEST
            + "\",\n"
            + "   \"config\": {\"mediaType\": \""
            + TestImages.OCI_CONFIG
            + "\", \"digest\": \""
            + Sha256.digest(id.getBytes(StandardCharsets.UTF_8))
            + "\", \"size\": "
            + id.length()
            + "},\n"
            + "   \"layers\": [],\n   \"annotations\": {\"id\": \""
            + id
            + TestImages.RUN_ID
            + "\"}\n}\n";
    return json.getBytes(StandardCharsets.UTF_8);
  }
}
