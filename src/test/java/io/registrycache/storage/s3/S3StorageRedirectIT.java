package io.registrycache.storage.s3;

import static org.assertj.core.api.Assertions.assertThat;

import java.net.URI;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import org.springframework.test.context.DynamicPropertyRegistry;
import org.springframework.test.context.DynamicPropertySource;

/**
 * The same on {@code storage.s3.redirect=true}: a second pull is answered with 307 to a
 * presigned URL of the object, which skopeo follows; a ranged GET's Range header is honoured
 * by the store.
 */
class S3StorageRedirectIT extends S3StoragePullIT {
  @DynamicPropertySource
  static void redirect(DynamicPropertyRegistry registry) {
    registry.add("registry-cache.storage.s3.redirect", () -> "true");
  }

  @Override
  HttpResponse<byte[]> rangedGet(String path, String range) throws Exception {
    HttpResponse<byte[]> redirect = cache.get(path, "Range", range);
    assertThat(redirect.statusCode()).isEqualTo(307);
    assertThat(redirect.headers().firstValue("Docker-Content-Digest")).isPresent();
    URI location = URI.create(redirect.headers().firstValue("Location").orElseThrow());
    assertThat(location.getPort()).as("the object store").isEqualTo(S3.getUri().getPort());
    return cache.http().send(
        HttpRequest.newBuilder(location).header("Range", range).build(),
        HttpResponse.BodyHandlers.ofByteArray());
  }
}
