package io.registrycache.testsupport;

import io.registrycache.testsupport.TestImages.Blob;
import io.registrycache.testsupport.TestImages.Descriptor;
import io.registrycache.testsupport.TestImages.Image;
import io.registrycache.testsupport.TestImages.ImageIndex;
import io.registrycache.testsupport.TestImages.Manifest;
import io.registrycache.testsupport.TestImages.PlatformImage;
import java.io.IOException;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.Base64;
import java.util.List;

/**
 * Pushes images to a registry with the OCI Distribution push API over plain {@link HttpClient}:
 * monolithic blob upload (POST, then PUT with {@code ?digest=}) and manifest PUT with its
 * Content-Type. Used to seed the upstream {@code registry:2}; the cache under test never sees these
 * requests.
 */
public final class ImagePusher {

  private final String baseUrl;
  private final String authorization;
  private final HttpClient http =
      HttpClient.newBuilder()
          .version(HttpClient.Version.HTTP_1_1)
          .connectTimeout(Duration.ofSeconds(5))
          .build();

  /**
   * @param baseUrl e.g. {@code http://localhost:32768}
   */
  public ImagePusher(String baseUrl) {
    this(baseUrl, null, null);
  }

  /** Pushes with Basic authentication (RFC 7617) when {@code username} is not null. */
  public ImagePusher(String baseUrl, String username, String password) {
    this.baseUrl = baseUrl.endsWith("/") ? baseUrl.substring(0, baseUrl.length() - 1) : baseUrl;
    this.authorization =
        username == null
            ? null
            : "Basic "
                + Base64.getEncoder()
                    .encodeToString((username + ":" + password).getBytes(StandardCharsets.UTF_8));
  }

  private ImagePusher(String baseUrl, String authorization, boolean raw) {
    this.baseUrl = baseUrl.endsWith("/") ? baseUrl.substring(0, baseUrl.length() - 1) : baseUrl;
    this.authorization = authorization;
  }

  /**
   * Pushes with {@code authorization} as the {@code Authorization} header, e.g. {@code Bearer
   * <token>}.
   */
  public static ImagePusher withAuthorization(String baseUrl, String authorization) {
    return new ImagePusher(baseUrl, authorization, true);
  }

  /** Uploads a blob in one piece; returns its descriptor. */
  public Descriptor pushBlob(String repository, Blob blob) {
    HttpResponse<String> started =
        send(
            HttpRequest.newBuilder(URI.create(baseUrl + "/v2/" + repository + "/blobs/uploads/"))
                .POST(HttpRequest.BodyPublishers.noBody()));
    expect(started, 202, "start upload of " + blob.digest());
    String location =
        started
            .headers()
            .firstValue("Location")
            .orElseThrow(() -> new IllegalStateException("no Location"));
    URI upload = URI.create(baseUrl + "/").resolve(location);
    String sep = upload.toString().contains("?") ? "&" : "?";
    HttpResponse<String> done =
        send(
            HttpRequest.newBuilder(URI.create(upload + sep + "digest=" + blob.digest()))
                .header("Content-Type", "application/octet-stream")
                .PUT(HttpRequest.BodyPublishers.ofByteArray(blob.bytes())));
    expect(done, 201, "finish upload of " + blob.digest());
    return blob.descriptor();
  }

  /**
   * PUTs a manifest under {@code reference} (tag or digest) with its media type as Content-Type;
   * checks the registry's {@code Docker-Content-Digest} is the digest of the bytes sent.
   */
  public Descriptor pushManifest(String repository, String reference, Manifest manifest) {
    HttpResponse<String> response =
        send(
            HttpRequest.newBuilder(
                    URI.create(baseUrl + "/v2/" + repository + "/manifests/" + reference))
                .header("Content-Type", manifest.mediaType())
                .PUT(HttpRequest.BodyPublishers.ofByteArray(manifest.bytes())));
    expect(response, 201, "put manifest " + repository + ":" + reference);
    String digest = response.headers().firstValue("Docker-Content-Digest").orElse(null);
    if (!manifest.digest().equals(digest)) {
      throw new IllegalStateException(
          "registry computed digest " + digest + ", expected " + manifest.digest());
    }
    return manifest.descriptor();
  }

  /** Pushes config, layers and the manifest under the image's tag. */
  public Image push(Image image) {
    for (Blob blob : image.blobs()) {
      pushBlob(image.repository(), blob);
    }
    pushManifest(image.repository(), image.tag(), image.manifest());
    return image;
  }

  /** Pushes every platform image (by digest), then the index under its tag. */
  public ImageIndex push(ImageIndex index) {
    for (PlatformImage platform : index.platforms()) {
      Image image = platform.image();
      for (Blob blob : image.blobs()) {
        pushBlob(index.repository(), blob);
      }
      pushManifest(index.repository(), image.manifest().digest(), image.manifest());
    }
    pushManifest(index.repository(), index.tag(), index.index());
    return index;
  }

  /** Pushes an artifact's blobs and its manifest (by digest), as oras/cosign do. */
  public TestImages.Artifact push(String repository, TestImages.Artifact artifact) {
    for (Blob blob : artifact.blobs()) {
      pushBlob(repository, blob);
    }
    pushManifest(repository, artifact.manifest().digest(), artifact.manifest());
    return artifact;
  }

  /**
   * Pushes the referrers tag schema index of {@code subject} under tag {@code <alg>-<hex>}, as
   * clients do against a registry without the referrers API.
   */
  public Manifest pushReferrersTag(
      String repository, String subjectDigest, List<TestImages.Artifact> artifacts) {
    Manifest index = TestImages.referrersIndex(artifacts);
    pushManifest(repository, subjectDigest.replace(':', '-'), index);
    return index;
  }

  private HttpResponse<String> send(HttpRequest.Builder builder) {
    if (authorization != null) {
      builder.header("Authorization", authorization);
    }
    HttpRequest request = builder.build();
    try {
      return http.send(request, HttpResponse.BodyHandlers.ofString());
    } catch (IOException e) {
      throw new IllegalStateException(request.method() + " " + request.uri() + " failed", e);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new IllegalStateException(e);
    }
  }

  private static void expect(HttpResponse<String> response, int status, String what) {
    if (response.statusCode() != status) {
      throw new IllegalStateException(
          what + ": HTTP " + response.statusCode() + " " + response.body());
    }
  }
}
