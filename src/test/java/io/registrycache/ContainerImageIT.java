package io.registrycache;

import static io.registrycache.testsupport.CacheClient.describe;
import static org.assertj.core.api.Assertions.assertThat;

import io.registrycache.testsupport.CacheClient;
import io.registrycache.testsupport.Sha256;
import io.registrycache.testsupport.TestImages;
import io.registrycache.testsupport.TestImages.Blob;
import io.registrycache.testsupport.TestImages.Image;
import io.registrycache.testsupport.TestImages.ImageIndex;
import io.registrycache.testsupport.UpstreamRegistryContainer;
import java.io.ByteArrayOutputStream;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.Assertions;
import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.testcontainers.DockerClientFactory;
import org.testcontainers.containers.GenericContainer;
import org.testcontainers.containers.Network;
import org.testcontainers.containers.wait.strategy.Wait;
import org.testcontainers.utility.DockerImageName;

/**
 * The service's own image (built by Jib in {@code pre-integration-test}) beside a registry:2 on a
 * Docker network: an image is pulled through it in all three request forms and the content is
 * checked byte for byte and digest by digest.
 */
class ContainerImageIT {

  static final String IMAGE =
      System.getProperty("registrycache.image", "registry-cache:0.1.0-SNAPSHOT");
  static final String REGISTRY_HOST = "registry:5000";

  static Network network;
  static UpstreamRegistryContainer registry;
  static GenericContainer<?> service;
  static CacheClient cache;

  @BeforeAll
  static void start() {
    Assumptions.assumeFalse(
        Boolean.getBoolean("registrycache.image.skip"),
        "service image not built (-Djib.skip=true): ContainerImageIT skipped");
    try {
      DockerClientFactory.instance().client().inspectImageCmd(IMAGE).exec();
    } catch (RuntimeException e) {
      Assertions.fail(
          "service image "
              + IMAGE
              + " is not in the local engine; the jib dockerBuild execution in "
              + "pre-integration-test should have built it (or pass -Djib.skip=true to skip this IT)",
          e);
    }
    network = Network.newNetwork();
    registry = new UpstreamRegistryContainer().withNetwork(network).withNetworkAliases("registry");
    registry.start();
    service =
        new GenericContainer<>(DockerImageName.parse(IMAGE))
            .withNetwork(network)
            .withNetworkAliases("registry-cache")
            .withExposedPorts(8080, 8081)
            .withEnv("REGISTRYCACHE_UPSTREAMS_LOCAL_URL", "http://registry:5000")
            .withEnv("REGISTRYCACHE_UPSTREAMS_LOCAL_HOST", REGISTRY_HOST)
            .waitingFor(
                Wait.forHttp("/actuator/health/readiness")
                    .forPort(8081)
                    .forStatusCode(200)
                    .withStartupTimeout(Duration.ofSeconds(90)));
    service.start();
    cache = new CacheClient("http://localhost:" + service.getMappedPort(8080));
  }

  @AfterAll
  static void stop() {
    if (service != null) {
      service.stop();
    }
    if (registry != null) {
      registry.stop();
    }
    if (network != null) {
      network.close();
    }
  }

  @Test
  void pullsAnImageThroughTheContainer() {
    Image image =
        registry.pusher().push(TestImages.smallOci(TestImages.uniqueRepository("ctr"), "v1"));

    CacheClient.assertManifest(
        cache.getManifest("/v2/" + image.repository() + "/manifests/v1"), image.manifest());
    CacheClient.assertManifest(
        cache.getManifest(
            "/v2/"
                + REGISTRY_HOST
                + "/"
                + image.repository()
                + "/manifests/"
                + image.manifest().digest()),
        image.manifest());
    CacheClient.assertManifest(
        cache.getManifest("/v2/" + image.repository() + "/manifests/v1?ns=" + REGISTRY_HOST),
        image.manifest());
    for (Blob blob : image.blobs()) {
      HttpResponse<byte[]> response =
          cache.get("/v2/" + image.repository() + "/blobs/" + blob.digest());
      assertThat(response.statusCode()).as(describe(response)).isEqualTo(200);
      assertThat(Sha256.digest(response.body())).isEqualTo(blob.digest());
      assertThat(response.headers().firstValue("Docker-Content-Digest")).hasValue(blob.digest());
    }

    // the blob landed in the image's storage volume, content-addressed
    Blob layer = image.layers().get(0);
    String hex = Sha256.hexOf(layer.digest());
    byte[] stored =
        service.copyFileFromContainer(
            "/var/lib/registry-cache/blobs/sha256/" + hex.substring(0, 2) + "/" + hex,
            in -> {
              ByteArrayOutputStream out = new ByteArrayOutputStream();
              in.transferTo(out);
              return out.toByteArray();
            });
    assertThat(stored).isEqualTo(layer.bytes());

    // second pull of a blob through the in-path form is a hit
    registry.syncLogs();
    String upstreamPath = "/v2/" + image.repository() + "/blobs/" + layer.digest();
    long before = registry.countRequests("GET", upstreamPath);
    assertThat(before).isEqualTo(1);
    HttpResponse<byte[]> again =
        cache.get("/v2/" + REGISTRY_HOST + "/" + image.repository() + "/blobs/" + layer.digest());
    assertThat(again.body()).isEqualTo(layer.bytes());
    registry.syncLogs();
    assertThat(registry.countRequests("GET", upstreamPath)).isEqualTo(1);
  }

  @Test
  void pullsAnIndexAndItsPlatformManifests() {
    ImageIndex index =
        registry.pusher().push(TestImages.index(TestImages.uniqueRepository("ctr-idx"), "multi"));
    CacheClient.assertManifest(
        cache.getManifest("/v2/" + index.repository() + "/manifests/multi"), index.index());
    for (String arch : new String[] {"amd64", "arm64"}) {
      Image platform = index.platform(arch).image();
      CacheClient.assertManifest(
          cache.getManifest(
              "/v2/" + index.repository() + "/manifests/" + platform.manifest().digest()),
          platform.manifest());
      for (Blob blob : platform.blobs()) {
        HttpResponse<byte[]> response =
            cache.get("/v2/" + index.repository() + "/blobs/" + blob.digest());
        assertThat(Sha256.digest(response.body())).isEqualTo(blob.digest());
      }
    }
  }

  @Test
  void exposesPrometheusOnTheManagementPort() {
    CacheClient management = new CacheClient("http://localhost:" + service.getMappedPort(8081));
    HttpResponse<byte[]> response = management.get("/actuator/prometheus");
    assertThat(response.statusCode()).isEqualTo(200);
    assertThat(new String(response.body(), StandardCharsets.UTF_8)).contains("registry_cache_");
  }
}
