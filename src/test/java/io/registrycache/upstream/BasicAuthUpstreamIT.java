package io.registrycache.upstream;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import io.registrycache.oci.MediaTypes;
import io.registrycache.oci.OciErrorCode;
import io.registrycache.oci.Reference;
import io.registrycache.oci.RepositoryName;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.springframework.core.io.buffer.DataBufferUtils;
import org.springframework.http.HttpStatus;
import org.testcontainers.containers.GenericContainer;
import org.testcontainers.containers.wait.strategy.Wait;
import org.testcontainers.images.builder.Transferable;

/**
 * Basic authentication (RFC 7617) against {@code registry:2} with an htpasswd file. The bcrypt
 * entry is made with {@code htpasswd} from Debian's {@code apache2-utils}.
 */
class BasicAuthUpstreamIT {

  private static final Duration WAIT = Duration.ofSeconds(30);
  private static final RepositoryName NAME = RepositoryName.parse("private/app");
  private static final String USER = "puller";
  private static final String PASSWORD = "s3cret-Pa55";

  static GenericContainer<?> registry;
  static String url;
  static TestRegistry.Image image;
  static WebClientUpstreamClient client;

  @BeforeAll
  static void start() throws Exception {
    registry =
        new GenericContainer<>("registry:2")
            .withExposedPorts(5000)
            .withEnv("REGISTRY_AUTH", "htpasswd")
            .withEnv("REGISTRY_AUTH_HTPASSWD_REALM", "registry-cache-test")
            .withEnv("REGISTRY_AUTH_HTPASSWD_PATH", "/auth/htpasswd")
            .withCopyToContainer(Transferable.of(htpasswd(USER, PASSWORD)), "/auth/htpasswd")
            .waitingFor(Wait.forHttp("/v2/").forStatusCode(401));
    registry.start();
    url = "http://localhost:" + registry.getMappedPort(5000);
    image = new TestRegistry(url, USER, PASSWORD).pushImage(NAME.value(), "v1", 100_000, 7);
    client = new WebClientUpstreamClient(null, new SimpleMeterRegistry());
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
        TestRegistry.upstream("basic-ok", url, s -> {
          s.setUsername(USER);
          s.setPassword(PASSWORD);
        });

    UpstreamManifest manifest =
        client.getManifest(upstream, NAME, Reference.parse("v1"), MediaTypes.ALL_MANIFESTS, 4 << 20).block(WAIT);
    assertThat(manifest.body()).isEqualTo(image.manifest());
    assertThat(manifest.upstreamDigest()).isEqualTo(image.manifestDigest());

    UpstreamBlob blob = client.getBlob(upstream, NAME, image.layerDigest()).block(WAIT);
    byte[] bytes = DataBufferUtils.join(blob.body()).map(b -> {
      byte[] out = new byte[b.readableByteCount()];
      b.read(out);
      DataBufferUtils.release(b);
      return out;
    }).block(WAIT);
    assertThat(bytes).isEqualTo(image.layer());
    assertThat(client.headBlob(upstream, NAME, image.configDigest()).block(WAIT)).isEqualTo(image.config().length);
  }

  @Test
  void passwordFileWithTrailingNewline(@TempDir Path dir) throws Exception {
    Path file = dir.resolve("password");
    Files.writeString(file, PASSWORD + "\n");
    Upstream upstream =
        TestRegistry.upstream("basic-file", url, s -> {
          s.setUsername(USER);
          s.setPasswordFile(file);
        });

    UpstreamManifestHead head =
        client.headManifest(upstream, NAME, Reference.parse("v1"), MediaTypes.ALL_MANIFESTS).block(WAIT);
    assertThat(head.digest()).isEqualTo(image.manifestDigest());
  }

  @Test
  void wrongCredentialsAreUnauthorized() {
    Upstream upstream =
        TestRegistry.upstream("basic-wrong", url, s -> {
          s.setUsername(USER);
          s.setPassword("wrong-password");
        });

    assertThatThrownBy(
            () -> client.getManifest(upstream, NAME, Reference.parse("v1"), MediaTypes.ALL_MANIFESTS, 4 << 20).block(WAIT))
        .isInstanceOfSatisfying(UpstreamException.class, e -> {
          assertThat(e.code()).isEqualTo(OciErrorCode.UNAUTHORIZED);
          assertThat(e.status()).isEqualTo(HttpStatus.UNAUTHORIZED);
          assertThat(e.getMessage()).contains("basic-wrong").contains(url).doesNotContain("wrong-password");
        });
    assertThatThrownBy(() -> client.getBlob(upstream, NAME, image.layerDigest()).block(WAIT))
        .isInstanceOfSatisfying(UpstreamException.class, e -> assertThat(e.code()).isEqualTo(OciErrorCode.UNAUTHORIZED));
  }

  @Test
  void noCredentialsAreUnauthorized() {
    Upstream upstream = TestRegistry.upstream("basic-none", url, s -> {});

    assertThatThrownBy(() -> client.headBlob(upstream, NAME, image.layerDigest()).block(WAIT))
        .isInstanceOfSatisfying(UpstreamException.class, e -> {
          assertThat(e.code()).isEqualTo(OciErrorCode.UNAUTHORIZED);
          assertThat(e.getMessage()).contains("basic-none").contains("no credentials");
        });
  }

  /** A bcrypt htpasswd line, made by {@code htpasswd -nbB} (package apache2-utils). */
  static String htpasswd(String user, String password) throws Exception {
    Process process;
    try {
      process = new ProcessBuilder("htpasswd", "-nbB", user, password).redirectErrorStream(true).start();
    } catch (java.io.IOException e) {
      throw new IllegalStateException(
          "this test needs the htpasswd tool: apt-get install apache2-utils", e);
    }
    String out = new String(process.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
    if (process.waitFor() != 0) {
      throw new IllegalStateException("htpasswd failed: " + out);
    }
    return out.trim() + "\n";
  }
}
