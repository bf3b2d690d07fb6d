package io.registrycache;

import static io.registrycache.testsupport.CacheClient.describe;
import static org.assertj.core.api.Assertions.assertThat;

import com.github.dockerjava.api.model.Capability;
import io.registrycache.testsupport.CacheClient;
import io.registrycache.testsupport.Sha256;
import io.registrycache.testsupport.TestFiles;
import io.registrycache.testsupport.TestImages;
import io.registrycache.testsupport.TestImages.Blob;
import io.registrycache.testsupport.TestImages.Image;
import io.registrycache.testsupport.UpstreamRegistryContainer;
import java.io.IOException;
import java.io.Reader;
import java.io.UncheckedIOException;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.PosixFilePermissions;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Base64;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.springframework.security.crypto.bcrypt.BCrypt;
import org.testcontainers.containers.BindMode;
import org.testcontainers.containers.GenericContainer;
import org.testcontainers.containers.Network;
import org.testcontainers.containers.wait.strategy.Wait;
import org.testcontainers.utility.DockerImageName;
import org.yaml.snakeyaml.Yaml;

/**
 * The chart's single-replica rendering (deploy/kubernetes/registry-cache.yaml, deploy/render.sh)
 * runs as a kubelet would run it, as far as Docker can: the service's image with the container's
 * environment (the ConfigMap by envFrom, the Deployment's env, Secret references given test
 * values), its volume mounts (ConfigMaps and Secrets as read-only folders, the claim as a host
 * folder, emptyDirs as tmpfs owned by the pod's fsGroup), the pod's user and group, a read-only
 * root file system, no capabilities and no privilege escalation, ready on its readiness probe. The
 * one change: the example upstream's URL points at the test's registry:2. A robot of the auth
 * Secret then pulls an image through it, digest-checked, and a request without credentials is
 * refused.
 */
class RenderedDeploymentIT {

  static final String ROBOT = "node-puller";
  static final String ROBOT_TOKEN = "0123456789abcdef0123456789abcdef0123456789abcdef";
  static final String ADMIN_TOKEN = "fedcba9876543210fedcba9876543210";

  static Network network;
  static UpstreamRegistryContainer registry;
  static GenericContainer<?> service;
  static CacheClient cache;
  static Map<String, Object> container;
  static Map<String, Object> podSecurityContext;
  static Path claim;
  static String claimMountPath;

  @SuppressWarnings("unchecked")
  @BeforeAll
  static void start() throws IOException {
    Assumptions.assumeFalse(
        Boolean.getBoolean("registrycache.image.skip"),
        "service image not built (-Djib.skip=true): RenderedDeploymentIT skipped");
    List<Map<String, Object>> docs = new ArrayList<>();
    try (Reader in = Files.newBufferedReader(Path.of("deploy/kubernetes/registry-cache.yaml"))) {
      for (Object doc : new Yaml().loadAll(in)) {
        if (doc != null) {
          docs.add((Map<String, Object>) doc);
        }
      }
    }
    Map<String, Object> pod =
        (Map<String, Object>)
            ((Map<String, Object>)
                    ((Map<String, Object>) only(docs, "Deployment", null).get("spec"))
                        .get("template"))
                .get("spec");
    container = ((List<Map<String, Object>>) pod.get("containers")).get(0);
    podSecurityContext = (Map<String, Object>) pod.get("securityContext");

    // the environment as the kubelet makes it
    Map<String, String> env = new LinkedHashMap<>();
    for (Map<String, Object> from : (List<Map<String, Object>>) container.get("envFrom")) {
      String name = (String) ((Map<String, Object>) from.get("configMapRef")).get("name");
      ((Map<String, Object>) only(docs, "ConfigMap", name).get("data"))
          .forEach((k, v) -> env.put(k, String.valueOf(v)));
    }
    for (Map<String, Object> e : (List<Map<String, Object>>) container.get("env")) {
      String name = (String) e.get("name");
      env.put(
          name,
          e.containsKey("value")
              ? String.valueOf(e.get("value"))
              : secretValue(
                  (Map<String, Object>)
                      ((Map<String, Object>) e.get("valueFrom")).get("secretKeyRef")));
    }
    assertThat(env).containsKey("REGISTRYCACHE_UPSTREAMS_CORP_URL");
    env.put("REGISTRYCACHE_UPSTREAMS_CORP_URL", "http://registry:5000");

    network = Network.newNetwork();
    registry = new UpstreamRegistryContainer().withNetwork(network).withNetworkAliases("registry");
    registry.start();

    long uid = ((Number) podSecurityContext.get("runAsUser")).longValue();
    long gid = ((Number) podSecurityContext.get("runAsGroup")).longValue();
    long fsGroup = ((Number) podSecurityContext.get("fsGroup")).longValue();
    Map<String, Object> securityContext = (Map<String, Object>) container.get("securityContext");
    GenericContainer<?> c =
        new GenericContainer<>(DockerImageName.parse(ContainerImageIT.IMAGE))
            .withNetwork(network)
            .withExposedPorts(port("http"), port("management"))
            .withEnv(env)
            .withCreateContainerCmdModifier(
                cmd -> {
                  cmd.withUser(uid + ":" + gid);
                  cmd.getHostConfig()
                      .withReadonlyRootfs(
                          Boolean.TRUE.equals(securityContext.get("readOnlyRootFilesystem")))
                      .withCapDrop(Capability.ALL)
                      .withSecurityOpts(
                          Boolean.FALSE.equals(securityContext.get("allowPrivilegeEscalation"))
                              ? List.of("no-new-privileges")
                              : List.of());
                });
    Map<String, Map<String, Object>> volumes = new LinkedHashMap<>();
    for (Map<String, Object> v : (List<Map<String, Object>>) pod.get("volumes")) {
      volumes.put((String) v.get("name"), v);
    }
    Map<String, String> tmpfs = new LinkedHashMap<>();
    for (Map<String, Object> mount : (List<Map<String, Object>>) container.get("volumeMounts")) {
      Map<String, Object> volume = volumes.get((String) mount.get("name"));
      String path = (String) mount.get("mountPath");
      if (volume.containsKey("persistentVolumeClaim")) {
        // a host folder the pod's user may write (the kubelet gives the volume to the fsGroup)
        assertThat(claim).as("one claim").isNull();
        claim = TestFiles.tempDirectory("registry-cache-claim-");
        Files.setPosixFilePermissions(claim, PosixFilePermissions.fromString("rwxrwxrwx"));
        c.withFileSystemBind(claim.toString(), path, BindMode.READ_WRITE);
        claimMountPath = path;
      } else if (volume.containsKey("emptyDir")) {
        // writable by the pod's fsGroup, as the kubelet makes a volume with fsGroup
        tmpfs.put(path, "rw,uid=0,gid=" + fsGroup + ",mode=2775");
      } else if (volume.containsKey("configMap")) {
        String name = (String) ((Map<String, Object>) volume.get("configMap")).get("name");
        c.withFileSystemBind(
            folderOf((Map<String, Object>) only(docs, "ConfigMap", name).get("data")).toString(),
            path,
            BindMode.READ_ONLY);
      } else if (volume.containsKey("secret")) {
        String name = (String) ((Map<String, Object>) volume.get("secret")).get("secretName");
        assertThat(name)
            .as("the only Secret volume of the single rendering")
            .isEqualTo("registry-cache-auth");
        c.withFileSystemBind(
            folderOf(
                    Map.of(
                        "htpasswd",
                            "alice:" + BCrypt.hashpw("a long password", BCrypt.gensalt(10)) + "\n",
                        "tokens", ROBOT + ":" + ROBOT_TOKEN + "\n"))
                .toString(),
            path,
            BindMode.READ_ONLY);
      } else {
        throw new AssertionError("volume kind not run by this test: " + volume);
      }
    }
    c.withTmpFs(tmpfs);
    Map<String, Object> readiness =
        (Map<String, Object>)
            ((Map<String, Object>) container.get("readinessProbe")).get("httpGet");
    c.waitingFor(
        Wait.forHttp((String) readiness.get("path"))
            .forPort(port((String) readiness.get("port")))
            .forStatusCode(200)
            .withStartupTimeout(Duration.ofSeconds(120)));
    service = c;
    service.start();
    cache = new CacheClient("http://localhost:" + service.getMappedPort(port("http")));
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
  void aRobotOfTheAuthSecretPullsThroughTheRenderedDeploymentAndTheBlobLandsOnTheClaim() {
    Image image =
        registry.pusher().push(TestImages.smallOci(TestImages.uniqueRepository("rendered"), "v1"));
    String basic =
        "Basic "
            + Base64.getEncoder()
                .encodeToString((ROBOT + ":" + ROBOT_TOKEN).getBytes(StandardCharsets.UTF_8));

    HttpResponse<byte[]> anonymous =
        cache.getManifest("/v2/" + image.repository() + "/manifests/v1");
    assertThat(anonymous.statusCode()).as(describe(anonymous)).isEqualTo(401);

    HttpResponse<byte[]> manifest =
        cache.get(
            "/v2/" + image.repository() + "/manifests/v1",
            "Accept",
            CacheClient.MANIFEST_ACCEPT,
            "Authorization",
            basic);
    CacheClient.assertManifest(manifest, image.manifest());
    for (Blob blob : image.blobs()) {
      HttpResponse<byte[]> response =
          cache.get(
              "/v2/" + image.repository() + "/blobs/" + blob.digest(), "Authorization", basic);
      assertThat(response.statusCode()).as(describe(response)).isEqualTo(200);
      assertThat(Sha256.digest(response.body())).isEqualTo(blob.digest());
    }

    // stored on the claim's mount, written by the pod's non-root user
    Blob layer = image.layers().get(0);
    String hex = Sha256.hexOf(layer.digest());
    assertThat(claimMountPath).isEqualTo("/var/lib/registry-cache");
    Path stored = claim.resolve("blobs/sha256/" + hex.substring(0, 2) + "/" + hex);
    try {
      assertThat(Files.readAllBytes(stored)).isEqualTo(layer.bytes());
      assertThat(Files.getAttribute(stored, "unix:uid"))
          .isEqualTo(((Number) podSecurityContext.get("runAsUser")).intValue());
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
  }

  @Test
  void theManagementPortAnswersTheAdminApiOnlyWithTheAdminSecretsTokenAndKeepsTheBudget() {
    CacheClient management =
        new CacheClient("http://localhost:" + service.getMappedPort(port("management")));
    assertThat(management.get("/actuator/prometheus").statusCode()).isEqualTo(200);
    HttpResponse<byte[]> without = management.get("/actuator/cache");
    assertThat(without.statusCode()).as(describe(without)).isIn(401, 403);
    HttpResponse<byte[]> with =
        management.get("/actuator/cache", "Authorization", "Bearer " + ADMIN_TOKEN);
    assertThat(with.statusCode()).as(describe(with)).isEqualTo(200);
    // the disk budget of ci/single-values.yaml (storage.maxBytes)
    assertThat(new String(with.body(), StandardCharsets.UTF_8))
        .contains("\"maxBytes\":90000000000");
  }

  /** A test value for each Secret key the rendering reads. */
  private static String secretValue(Map<String, Object> ref) {
    String secret = ref.get("name") + "/" + ref.get("key");
    return switch (secret) {
      case "registry-cache-admin/token" -> ADMIN_TOKEN;
      case "registry-cache-upstream/username" -> "puller";
      case "registry-cache-upstream/password" -> "not-checked-by-registry-2";
      default -> throw new AssertionError("a Secret key this test gives no value: " + secret);
    };
  }

  @SuppressWarnings("unchecked")
  private static int port(String name) {
    for (Map<String, Object> p : (List<Map<String, Object>>) container.get("ports")) {
      if (name.equals(p.get("name"))) {
        return ((Number) p.get("containerPort")).intValue();
      }
    }
    throw new AssertionError("no container port " + name);
  }

  @SuppressWarnings("unchecked")
  private static Map<String, Object> only(
      List<Map<String, Object>> docs, String kind, String name) {
    List<Map<String, Object>> found =
        docs.stream()
            .filter(d -> kind.equals(d.get("kind")))
            .filter(
                d ->
                    name == null
                        || name.equals(((Map<String, Object>) d.get("metadata")).get("name")))
            .toList();
    assertThat(found).as(kind + " " + name).hasSize(1);
    return found.get(0);
  }

  /**
   * A folder holding one file per entry, readable by any user (as the kubelet's projections are).
   */
  private static Path folderOf(Map<String, ?> files) throws IOException {
    Path dir = TestFiles.tempDirectory("registry-cache-rendered-");
    Files.setPosixFilePermissions(dir, PosixFilePermissions.fromString("rwxr-xr-x"));
    for (Map.Entry<String, ?> e : files.entrySet()) {
      Path file = dir.resolve(e.getKey());
      Files.writeString(file, String.valueOf(e.getValue()));
      Files.setPosixFilePermissions(file, PosixFilePermissions.fromString("rw-r--r--"));
    }
    return dir;
  }
}
