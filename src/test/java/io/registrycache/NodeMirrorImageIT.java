package io.registrycache;

import static org.assertj.core.api.Assertions.assertThat;

import com.github.dockerjava.api.DockerClient;
import com.github.dockerjava.api.model.Capability;
import io.registrycache.nodemirror.NodeMirrorHosts;
import io.registrycache.nodemirror.NodeMirrorHosts.Registry;
import io.registrycache.testsupport.Command;
import java.io.IOException;
import java.net.URI;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.PosixFilePermissions;
import java.time.Duration;
import java.util.ArrayList;
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
 * The chart's node mirror DaemonSet ({@code nodeMirror.enabled}, rendered here with {@code helm
 * template}) runs as a kubelet would run its container, as far as Docker can: the service image
 * with the container's command, arguments and environment, its user, read-only root file system,
 * dropped capabilities, no privilege escalation and memory limit, a folder standing in for the
 * node's /etc/containerd/certs.d at the hostPath volume's mount path. It writes exactly the
 * generator's files, leaves a foreign one alone, and removes its own when the container is stopped
 * (SIGTERM, as when the DaemonSet is deleted on uninstall). Needs helm: skipped without it, failed
 * when {@code CI} is set.
 */
class NodeMirrorImageIT {

  static final String IMAGE = ContainerImageIT.IMAGE;

  @TempDir Path certsD;

  /** The DaemonSet of the chart's rendering with the node mirror on, for three registries. */
  @SuppressWarnings("unchecked")
  static Map<String, Object> renderedDaemonSet() {
    Command.Result rendered =
        Command.run(
            Duration.ofSeconds(60),
            "helm",
            "template",
            "registry-cache",
            "deploy/helm/registry-cache",
            "--set",
            "upstreams.corp.host=registry.example.com",
            "--set",
            "upstreams.corp.url=https://registry.example.com",
            "--set",
            "nodeMirror.enabled=true",
            "--set",
            "nodeMirror.registries={registry.example.com,ghcr.io,docker.io=https://registry-1.docker.io}");
    assertThat(rendered.exitCode()).as(rendered.output()).isZero();
    List<Map<String, Object>> daemonSets = new ArrayList<>();
    for (Object doc : new Yaml().loadAll(rendered.output())) {
      if (doc instanceof Map<?, ?> m && "DaemonSet".equals(m.get("kind"))) {
        daemonSets.add((Map<String, Object>) m);
      }
    }
    assertThat(daemonSets).as("DaemonSets of the rendering").hasSize(1);
    return daemonSets.get(0);
  }

  @SuppressWarnings("unchecked")
  static <T> T at(Object node, String... path) {
    Object value = node;
    for (String key : path) {
      value =
          key.matches("[0-9]+")
              ? ((List<Object>) value).get(Integer.parseInt(key))
              : ((Map<String, Object>) value).get(key);
      assertThat(value).as(String.join(".", path)).isNotNull();
    }
    return (T) value;
  }

  @Test
  void theRenderedContainerWritesTheHostsFilesAndRemovesThemWhenStopped() throws IOException {
    Assumptions.assumeFalse(
        Boolean.getBoolean("registrycache.image.skip"),
        "service image not built (-Djib.skip=true): NodeMirrorImageIT skipped");
    Command.requireTool(Command.onPath("helm"), "helm is not installed (.ci/go-tools.sh helm)");
    DockerClient docker = DockerClientFactory.instance().client();
    try {
      docker.inspectImageCmd(IMAGE).exec();
    } catch (RuntimeException e) {
      Assertions.fail(
          "service image " + IMAGE + " is not in the local engine (jib dockerBuild builds it)", e);
    }
    Map<String, Object> pod = at(renderedDaemonSet(), "spec", "template", "spec");
    List<Map<String, Object>> containers = at(pod, "containers");
    assertThat(containers).hasSize(1);
    Map<String, Object> container = containers.get(0);
    List<String> command = at(container, "command");
    List<String> args = at(container, "args");
    Map<String, Object> security = at(container, "securityContext");
    String memory = at(container, "resources", "limits", "memory");
    assertThat(memory).endsWith("Mi");
    long memoryLimit = Long.parseLong(memory.replace("Mi", "")) * 1024 * 1024;
    List<Map<String, Object>> env = at(container, "env");
    String javaToolOptions =
        env.stream()
            .filter(e -> "JAVA_TOOL_OPTIONS".equals(e.get("name")))
            .map(e -> (String) e.get("value"))
            .findFirst()
            .orElseThrow();
    List<Map<String, Object>> mounts = at(container, "volumeMounts");
    assertThat(mounts).hasSize(1);
    assertThat((String) at(mounts.get(0), "name")).isEqualTo("certs-d");
    String mountPath = at(mounts.get(0), "mountPath");
    List<Map<String, Object>> volumes = at(pod, "volumes");
    assertThat(volumes).hasSize(1);
    assertThat((String) at(volumes.get(0), "hostPath", "path"))
        .isEqualTo("/etc/containerd/certs.d");
    assertThat(security)
        .containsEntry("readOnlyRootFilesystem", true)
        .containsEntry("allowPrivilegeEscalation", false);
    assertThat((List<String>) at(security, "capabilities", "drop")).containsExactly("ALL");
    String user = at(security, "runAsUser").toString() + ":" + at(security, "runAsGroup");

    // the node's folder is root's; here the test's, opened for a container user without DAC
    // capabilities
    Files.setPosixFilePermissions(certsD, PosixFilePermissions.fromString("rwxrwxrwx"));
    Path foreign = Files.createDirectories(certsD.resolve("quay.io")).resolve("hosts.toml");
    Files.writeString(foreign, "server = \"https://quay.io\"\n");

    try (GenericContainer<?> mirror =
        new GenericContainer<>(DockerImageName.parse(IMAGE))
            .withCreateContainerCmdModifier(
                cmd -> {
                  cmd.withEntrypoint(command.toArray(String[]::new));
                  cmd.withUser(user);
                  cmd.getHostConfig()
                      .withReadonlyRootfs(true)
                      .withCapDrop(Capability.ALL)
                      .withSecurityOpts(List.of("no-new-privileges"))
                      .withMemory(memoryLimit)
                      .withMemorySwap(memoryLimit);
                })
            .withCommand(args.toArray(String[]::new))
            .withEnv("JAVA_TOOL_OPTIONS", javaToolOptions)
            .withFileSystemBind(certsD.toString(), mountPath, BindMode.READ_WRITE)
            .waitingFor(
                Wait.forLogMessage(".*node-mirror: waiting.*\\n", 1)
                    .withStartupTimeout(Duration.ofSeconds(60)))) {
      mirror.start();

      // the chart's default cache URL: the NodePort Service on each node's loopback
      NodeMirrorHosts generator = new NodeMirrorHosts(URI.create("http://127.0.0.1:30080"), null);
      assertThat(files())
          .containsExactlyEntriesOf(
              new TreeMap<>(
                  Map.of(
                      "docker.io/hosts.toml",
                          generator.hostsToml(
                              new Registry(
                                  "docker.io", URI.create("https://registry-1.docker.io"))),
                      "ghcr.io/hosts.toml", generator.hostsToml(Registry.of("ghcr.io")),
                      "quay.io/hosts.toml", "server = \"https://quay.io\"\n",
                      "registry.example.com/hosts.toml",
                          generator.hostsToml(Registry.of("registry.example.com")))));

      // SIGTERM, as when the DaemonSet is deleted: its files go, the foreign one stays
      docker.stopContainerCmd(mirror.getContainerId()).withTimeout(15).exec();
      assertThat(mirror.getLogs())
          .contains("node-mirror: removed " + mountPath + "/ghcr.io/hosts.toml");
      assertThat(files())
          .containsExactlyEntriesOf(Map.of("quay.io/hosts.toml", "server = \"https://quay.io\"\n"));
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
