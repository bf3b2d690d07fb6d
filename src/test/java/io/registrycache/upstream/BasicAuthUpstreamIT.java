package io.registrycache.upstream;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import io.registrycache.oci.MediaTypes;
import io.registrycache.oci.OciErrorCode;
import io.registrycache.oci.Reference;
import io.registrycache.oci.RepositoryName;
import io.registrycache.testsupport.DataBuffers;
import io.registrycache.testsupport.PushedImage;
import io.registrycache.testsupport.TestImages;
import io.registrycache.testsupport.TestUpstreams;
import io.registrycache.testsupport.UpstreamRegistryContainer;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.springframework.http.HttpStatus;

/**
 * Basic authentication (RFC 7617) against {@code registry:2} with an htpasswd file ({@link
 * UpstreamRegistryContainer#withHtpasswd}).
 */
class BasicAuthUpstreamIT {

  private static final Duration WAIT = Duration.ofSeconds(30);
  private static final RepositoryName NAME = RepositoryName.parse("private/app");
  private static final String USER = "puller";
  private static final String PASSWORD = "s3cret-Pa55";

  static UpstreamRegistryContainer registry;
  static String url;
  static PushedImage image;
  static ReactorNettyUpstreamClient client;

  @BeforeAll
  static void start() {
    registry = new UpstreamRegistryContainer().withHtpasswd(USER, PASSWORD);
    registry.start();
    url = registry.baseUrl();
    image =
        PushedImage.of(
            registry
                .pusher()
                .push(
                    TestImages.withLayers(NAME.value(), "v1", TestImages.randomBytes(100_000, 7))));
    client = new ReactorNettyUpstreamClient(null, new SimpleMeterRegistry());
  }

  @AfterAll
  static void stop() {
    if (client != null) {
      client.destroy();
    }
    if (registry != null) {
      registry.stop();
    }
  }

  @Test
  void rightCredentialsPullManifestAndBlob() {
    Upstream upstream =
        TestUpstreams.upstream(
            "basic-ok",
            url,
            s -> {
              s.put("username", USER);
              s.put("password", PASSWORD);
            });

    UpstreamManifest manifest =
        client
            .getManifest(upstream, NAME, Reference.parse("v1"), MediaTypes.ALL_MANIFESTS, 4 << 20)
            .block(WAIT);
    assertThat(manifest.body()).isEqualTo(image.manifest());
    assertThat(manifest.upstreamDigest()).isEqualTo(image.manifestDigest());

    UpstreamBlob blob = client.getBlob(upstream, NAME, image.layerDigest()).block(WAIT);
    byte[] bytes = DataBuffers.join(blob.body(), WAIT);
    assertThat(bytes).isEqualTo(image.layer());
    assertThat(client.headBlob(upstream, NAME, image.configDigest()).block(WAIT))
        .isEqualTo(image.config().length);
  }

  @Test
  void passwordFileWithTrailingNewline(@TempDir Path dir) throws Exception {
    Path file = dir.resolve("password");
    Files.writeString(file, PASSWORD + "\n");
    Upstream upstream =
        TestUpstreams.upstream(
            "basic-file",
            url,
            s -> {
              s.put("username", USER);
              s.put("password-file", file);
            });

    UpstreamManifestHead head =
        client
            .headManifest(upstream, NAME, Reference.parse("v1"), MediaTypes.ALL_MANIFESTS)
            .block(WAIT);
    assertThat(head.digest()).isEqualTo(image.manifestDigest());
  }

  @Test
  void wrongCredentialsAreUnauthorized() {
    Upstream upstream =
        TestUpstreams.upstream(
            "basic-wrong",
            url,
            s -> {
              s.put("username", USER);
              s.put("password", "wrong-password");
            });

    assertThatThrownBy(
            () ->
                client
                    .getManifest(
                        upstream, NAME, Reference.parse("v1"), MediaTypes.ALL_MANIFESTS, 4 << 20)
                    .block(WAIT))
        .isInstanceOfSatisfying(
            UpstreamException.class,
            e -> {
              assertThat(e.code()).isEqualTo(OciErrorCode.UNAUTHORIZED);
              assertThat(e.status()).isEqualTo(HttpStatus.UNAUTHORIZED);
              assertThat(e.getMessage())
                  .contains("basic-wrong")
                  .contains(url)
                  .doesNotContain("wrong-password");
            });
    assertThatThrownBy(() -> client.getBlob(upstream, NAME, image.layerDigest()).block(WAIT))
        .isInstanceOfSatisfying(
            UpstreamException.class,
            e -> assertThat(e.code()).isEqualTo(OciErrorCode.UNAUTHORIZED));
  }

  @Test
  void noCredentialsAreUnauthorized() {
    Upstream upstream = TestUpstreams.upstream("basic-none", url, s -> {});

    assertThatThrownBy(() -> client.headBlob(upstream, NAME, image.layerDigest()).block(WAIT))
        .isInstanceOfSatisfying(
            UpstreamException.class,
            e -> {
              assertThat(e.code()).isEqualTo(OciErrorCode.UNAUTHORIZED);
              assertThat(e.getMessage()).contains("basic-none").contains("no credentials");
            });
  }
}
