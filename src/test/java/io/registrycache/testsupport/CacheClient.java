package io.registrycache.testsupport;

import static org.assertj.core.api.Assertions.assertThat;

import com.jayway.jsonpath.JsonPath;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.Arrays;
import java.util.List;

/** A plain HTTP/1.1 client for the cache under test, as an OCI client would talk to it. */
public final class CacheClient {

  /** What container runtimes send: index types first. */
  public static final String MANIFEST_ACCEPT =
      String.join(
          ", ",
          List.of(
              "application/vnd.oci.image.index.v1+json",
              "application/vnd.docker.distribution.manifest.list.v2+json",
              "application/vnd.oci.image.manifest.v1+json",
              "application/vnd.docker.distribution.manifest.v2+json"));

  private final String baseUrl;
  private final HttpClient http;
  private final Duration timeout;

  public CacheClient(String baseUrl) {
    this(baseUrl, Duration.ofSeconds(60));
  }

  /**
   * @param timeout per request, until the whole response is in
   */
  public CacheClient(String baseUrl, Duration timeout) {
    this.baseUrl = baseUrl;
    this.timeout = timeout;
    this.http =
        HttpClient.newBuilder()
            .version(HttpClient.Version.HTTP_1_1)
            .connectTimeout(Duration.ofSeconds(5))
            .build();
  }

  /** {@code http://localhost:<port>}. */
  public static CacheClient onPort(int port) {
    return new CacheClient("http://localhost:" + port);
  }

  /** The same client with another per-request timeout. */
  public CacheClient withTimeout(Duration timeout) {
    return new CacheClient(baseUrl, timeout);
  }

  public String baseUrl() {
    return baseUrl;
  }

  public HttpClient http() {
    return http;
  }

  /** GET {@code pathAndQuery}; {@code headers} are name, value pairs. */
  public HttpResponse<byte[]> get(String pathAndQuery, String... headers) {
    return send("GET", pathAndQuery, null, headers);
  }

  public HttpResponse<byte[]> head(String pathAndQuery, String... headers) {
    return send("HEAD", pathAndQuery, null, headers);
  }

  /** GET a manifest with the Accept header of a container runtime. */
  public HttpResponse<byte[]> getManifest(String pathAndQuery) {
    return get(pathAndQuery, "Accept", MANIFEST_ACCEPT);
  }

  public HttpResponse<byte[]> headManifest(String pathAndQuery) {
    return head(pathAndQuery, "Accept", MANIFEST_ACCEPT);
  }

  /** POST a JSON body (the admin API). */
  public HttpResponse<byte[]> postJson(String pathAndQuery, String json) {
    return send(
        "POST",
        pathAndQuery,
        json.getBytes(StandardCharsets.UTF_8),
        "Content-Type",
        "application/json");
  }

  /**
   * Pulls {@code image} as a client does, the manifest by tag and then every blob, and checks that
   * each answer is 200 with exactly the bytes pushed (so every digest).
   */
  public void pullAndVerify(TestImages.Image image) {
    HttpResponse<byte[]> manifest =
        getManifest("/v2/" + image.repository() + "/manifests/" + image.tag());
    expectBytes(
        manifest, image.manifest().bytes(), "manifest " + image.repository() + ":" + image.tag());
    for (TestImages.Blob blob : image.blobs()) {
      HttpResponse<byte[]> response = get("/v2/" + image.repository() + "/blobs/" + blob.digest());
      expectBytes(response, blob.bytes(), "blob " + blob.digest());
    }
  }

  private static void expectBytes(HttpResponse<byte[]> response, byte[] expected, String what) {
    if (response.statusCode() != 200) {
      throw new AssertionError(what + ": " + describe(response));
    }
    if (!Arrays.equals(response.body(), expected)) {
      throw new AssertionError(
          what
              + ": "
              + response.body().length
              + " bytes of digest "
              + Sha256.digest(response.body())
              + ", expected "
              + expected.length
              + " bytes of digest "
              + Sha256.digest(expected));
    }
  }

  public HttpResponse<byte[]> send(
      String method, String pathAndQuery, byte[] body, String... headers) {
    try {
      return sendOrThrow(method, pathAndQuery, body, headers);
    } catch (IOException e) {
      throw new UncheckedIOException(method + " " + pathAndQuery + " failed", e);
    }
  }

  /** Like {@link #send} but lets an aborted response surface as {@link IOException}. */
  public HttpResponse<byte[]> sendOrThrow(
      String method, String pathAndQuery, byte[] body, String... headers) throws IOException {
    HttpRequest.Builder builder =
        HttpRequest.newBuilder(URI.create(baseUrl + pathAndQuery))
            .timeout(timeout)
            .method(
                method,
                body == null
                    ? HttpRequest.BodyPublishers.noBody()
                    : HttpRequest.BodyPublishers.ofByteArray(body));
    for (int i = 0; i + 1 < headers.length; i += 2) {
      builder.header(headers[i], headers[i + 1]);
    }
    try {
      return http.send(builder.build(), HttpResponse.BodyHandlers.ofByteArray());
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new IllegalStateException(e);
    }
  }

  /** The first error's code of an OCI error body, or {@code null} when the body is not one. */
  public static String errorCode(HttpResponse<byte[]> response) {
    return errorField(response, "code");
  }

  public static String errorMessage(HttpResponse<byte[]> response) {
    return errorField(response, "message");
  }

  private static String errorField(HttpResponse<byte[]> response, String field) {
    String body = new String(response.body(), StandardCharsets.UTF_8);
    try {
      return JsonPath.read(body, "$.errors[0]." + field);
    } catch (RuntimeException e) {
      return null;
    }
  }

  /** For failure messages: status, headers and (abbreviated) body. */
  public static String describe(HttpResponse<byte[]> response) {
    String body = new String(response.body(), StandardCharsets.UTF_8);
    if (body.length() > 500) {
      body = body.substring(0, 500) + "...";
    }
    return response.request().method()
        + " "
        + response.uri()
        + " -> "
        + response.statusCode()
        + " "
        + response.headers().map()
        + " "
        + body;
  }

  /**
   * A manifest answer is 200 with exactly {@code expected}'s bytes, its digest in
   * Docker-Content-Digest, its media type and its size.
   */
  public static void assertManifest(HttpResponse<byte[]> response, TestImages.Manifest expected) {
    assertThat(response.statusCode()).as(describe(response)).isEqualTo(200);
    assertThat(response.body())
        .as("manifest must be served byte for byte as the upstream has it")
        .isEqualTo(expected.bytes());
    assertThat(Sha256.digest(response.body())).isEqualTo(expected.digest());
    assertThat(response.headers().firstValue("Docker-Content-Digest")).hasValue(expected.digest());
    assertThat(response.headers().firstValue("Content-Type")).hasValue(expected.mediaType());
    assertThat(response.headers().firstValue("Content-Length"))
        .hasValue(Long.toString(expected.size()));
  }

  /** A HEAD of a manifest: 200, no body, and the headers of {@code expected}. */
  public static void assertHeadOf(HttpResponse<byte[]> response, TestImages.Manifest expected) {
    assertThat(response.statusCode()).as(describe(response)).isEqualTo(200);
    assertThat(response.body()).isEmpty();
    assertThat(response.headers().firstValue("Docker-Content-Digest")).hasValue(expected.digest());
    assertThat(response.headers().firstValue("Content-Type")).hasValue(expected.mediaType());
    assertThat(response.headers().firstValue("Content-Length"))
        .as("HEAD Content-Length is the manifest's real size")
        .hasValue(Long.toString(expected.size()));
  }
}
