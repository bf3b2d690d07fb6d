package io.registrycache;

import static org.assertj.core.api.Assertions.assertThat;

import com.github.dockerjava.api.DockerClient;
import com.github.dockerjava.api.model.Capability;
import io.registrycache.admin.NodeMirrorHosts;
import io.registrycache.admin.NodeMirrorHosts.Registry;
import java.io.IOException;
import java.net.URI;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.PosixFilePermissions;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.stream.Stream;
import org.junit.jupiter.api.Assertions;
import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.testcontainers.DockerClientFactory;
import org.testcontainers.containers.BindMode;
import org.testcontainers.containers.GenericContainer;
import org.testcontainers.containers.wait.strategy.Wait;
import org.testcontainers.utility.DockerImageName;
import org.yaml.snakeyaml.Yaml;

/**
 * The chart's node mirror container (templates/nodemirror.yaml) as the service image runs it: the
 * generator's main class on the image's class path, the chart's JVM options and memory limit, root
 * without capabilities on a read-only root file system, a folder standing in for the node's
 * /etc/containerd/certs.d. It writes exactly the generator's files, leaves a foreign one alone,
 * and removes its own when the container is stopped (SIGTERM, as on uninstall).
 */
class NodeMirrorImageIT {

  static final String IMAGE = ContainerImageIT.IMAGE;
  static final Path VALUES = Path.of("deploy/helm/registry-cache/values.yaml");

  @TempDir Path certsD;

  /** The chart's nodeMirror section of values.yaml. */
  @SuppressWarnings("unchecked")
  static Map<String, Object> nodeMirrorValues() throws IOException {
    Map<String, Object> values = new Yaml().load(Files.readString(VALUES));
    return (Map<String, Object>) values.get("nodeMirror");
  }

  @Test
  void writesTheHostsFilesAndRemovesThemWhenStopped() throws IOException {
    Assumptions.assumeFalse(
        Boolean.getBoolean("registrycache.image.skip"),
        "service image not built (-Djib.skip=true): NodeMirrorImageIT skipped");
    DockerClient docker = DockerClientFactory.instance().client();
    try {
      docker.inspectImageCmd(IMAGE).exec();
    } catch (RuntimeException e) {
      Assertions.fail("service image " + IMAGE + " is not in the local engine (jib dockerBuild builds it)", e);
    }
    // the node's folder is root's; here the test's, opened for the container's root without DAC capabilities
    Files.setPosixFilePermissions(certsD, PosixFilePermissions.fromString("rwxrwxrwx"));
    Path foreign = Files.createDirectories(certsD.resolve("quay.io")).resolve("hosts.toml");
    Files.writeString(foreign, "server = \"https://quay.io\"\n");
    String cache = "http://127.0.0.1:30080";
    long memoryLimit = 96L * 1024 * 1024;
    Map<String, Object> chart = nodeMirrorValues();
    @SuppressWarnings("unchecked")
    Object limit = ((Map<String, Map<String, Object>>) chart.get("resources")).get("limits").get("memory");
    assertThat(limit).as("the chart's memory limit, as tested here").isEqualTo("96Mi");

    try (GenericContainer<?> mirror = new GenericContainer<>(DockerImageName.parse(IMAGE))
        .withCreateContainerCmdModifier(cmd -> {
          cmd.withEntrypoint("java", "-cp", "@/app/jib-classpath-file", "io.registrycache.admin.NodeMirrorHosts");
          cmd.withUser("0:0");
          cmd.getHostConfig()
              .withReadonlyRootfs(true)
              .withCapDrop(Capability.ALL)
              .withSecurityOpts(List.of("no-new-privileges"))
              .withMemory(memoryLimit)
              .withMemorySwap(memoryLimit);
        })
        .withCommand("--dir", "/host/certs.d", "--cache", cache, "--registry", "registry.example.com",
            "--registry", "ghcr.io", "--registry", "docker.io=https://registry-1.docker.io", "--stay")
        .withEnv("JAVA_TOOL_OPTIONS", (String) chart.get("javaToolOptions"))
        .withFileSystemBind(certsD.toString(), "/host/certs.d", BindMode.READ_WRITE)
        .waitingFor(Wait.forLogMessage(".*node-mirror: waiting.*\\n", 1).withStartupTimeout(Duration.ofSeconds(60)))) {
      mirror.start();

      NodeMirrorHosts generator = new NodeMirrorHosts(URI.create(cache), null);
      assertThat(files()).containsExactlyEntriesOf(new TreeMap<>(Map.of(
          "docker.io/hosts.toml", generator.hostsToml(
              new Registry("docker.io", URI.create("https://registry-1.docker.io"))),
          "ghcr.io/hosts.toml", generator.hostsToml(Registry.of("ghcr.io")),
          "quay.io/hosts.toml", "server = \"https://quay.io\"\n",
          "registry.example.com/hosts.toml", generator.hostsToml(Registry.of("registry.example.com")))));

      // SIGTERM, as when the DaemonSet is deleted: its files go, the foreign one stays
      docker.stopContainerCmd(mirror.getContainerId()).withTimeout(15).exec();
      assertThat(mirror.getLogs()).contains("node-mirror: removed /host/certs.d/ghcr.io/hosts.toml");
      assertThat(files()).containsExactlyEntriesOf(Map.of("quay.io/hosts.toml", "server = \"https://quay.io\"\n"));
      assertThat(certsD.resolve("ghcr.io")).doesNotExist();
    }
  }

  private Map<String, String> files() throws IOException {
    Map<String, String> files = new TreeMap<>();
    try (Stream<Path> walk = Files.walk(certsD)) {
      for (Path p : walk.filter(Files::isRegularFile).toList()) {
        files.put(certsD.relativize(p).toString(), Files.readString(p, StandardCharsets.UTF_8));
      }
    }
    return files;
  }
}
