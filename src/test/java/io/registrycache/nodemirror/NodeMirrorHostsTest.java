package io.registrycache.nodemirror;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.PrintStream;
import java.net.URI;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Map;
import java.util.TreeMap;
import java.util.stream.Stream;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

class NodeMirrorHostsTest {

  @TempDir Path dir;

  private final ByteArrayOutputStream out = new ByteArrayOutputStream();
  private final ByteArrayOutputStream err = new ByteArrayOutputStream();

  private int run(String... args) {
    return NodeMirrorHosts.run(
        args,
        new PrintStream(out, true, StandardCharsets.UTF_8),
        new PrintStream(err, true, StandardCharsets.UTF_8));
  }

  /** Every regular file under {@link #dir}, by relative path, with its text. */
  private Map<String, String> files() throws IOException {
    Map<String, String> files = new TreeMap<>();
    try (Stream<Path> walk = Files.walk(dir)) {
      for (Path p : walk.filter(Files::isRegularFile).toList()) {
        files.put(dir.relativize(p).toString(), Files.readString(p, StandardCharsets.UTF_8));
      }
    }
    return files;
  }

  private static String expected(String host, String server, String authorization) {
    return "# Written by registry-cache's node mirror generator.\n"
        + "# containerd tries the cache first (it appends ?ns="
        + host
        + ", by which the cache picks the upstream),\n"
        + "# then falls back to the registry itself. Replaced or removed by the generator: do not edit.\n"
        + "server = \""
        + server
        + "\"\n"
        + "\n"
        + "[host.\"http://127.0.0.1:30080\"]\n"
        + "  capabilities = [\"pull\", \"resolve\"]\n"
        + (authorization == null
            ? ""
            : "  [host.\"http://127.0.0.1:30080\".header]\n"
                + "    authorization = \""
                + authorization
                + "\"\n");
  }

  @Test
  void writesExactlyOneHostsTomlPerRegistryThenRemovesOnlyItsOwn() throws IOException {
    Path foreign = Files.createDirectories(dir.resolve("quay.io")).resolve("hosts.toml");
    Files.writeString(foreign, "server = \"https://quay.io\"\n");
    Files.writeString(dir.resolve("notes.txt"), "kept");

    assertThat(
            run(
                "--dir",
                dir.toString(),
                "--cache",
                "http://127.0.0.1:30080",
                "--registry",
                "registry.example.com",
                "--registry",
                "ghcr.io",
                "--registry",
                "docker.io=https://registry-1.docker.io"))
        .as(err.toString())
        .isZero();

    assertThat(files())
        .containsExactlyEntriesOf(
            new TreeMap<>(
                Map.of(
                    "docker.io/hosts.toml",
                        expected("docker.io", "https://registry-1.docker.io", null),
                    "ghcr.io/hosts.toml", expected("ghcr.io", "https://ghcr.io", null),
                    "notes.txt", "kept",
                    "quay.io/hosts.toml", "server = \"https://quay.io\"\n",
                    "registry.example.com/hosts.toml",
                        expected("registry.example.com", "https://registry.example.com", null))));

    // one registry fewer: its file and folder go; the others and the foreign files stay
    assertThat(
            run(
                "--dir",
                dir.toString(),
                "--cache",
                "http://127.0.0.1:30080",
                "--registry",
                "registry.example.com",
                "--registry",
                "docker.io=https://registry-1.docker.io"))
        .as(err.toString())
        .isZero();
    assertThat(files())
        .containsExactlyEntriesOf(
            new TreeMap<>(
                Map.of(
                    "docker.io/hosts.toml",
                    expected("docker.io", "https://registry-1.docker.io", null),
                    "notes.txt",
                    "kept",
                    "quay.io/hosts.toml",
                    "server = \"https://quay.io\"\n",
                    "registry.example.com/hosts.toml",
                    expected("registry.example.com", "https://registry.example.com", null))));
    assertThat(dir.resolve("ghcr.io")).doesNotExist();
    assertThat(out.toString()).contains("removed " + dir.resolve("ghcr.io/hosts.toml"));

    // --remove: everything it wrote, nothing else
    assertThat(run("--dir", dir.toString(), "--remove")).as(err.toString()).isZero();
    assertThat(files()).containsOnlyKeys("notes.txt", "quay.io/hosts.toml");
  }

  @Test
  void aForeignHostsTomlOfAListedRegistryIsLeftAloneAndReported() throws IOException {
    Path foreign = Files.createDirectories(dir.resolve("ghcr.io")).resolve("hosts.toml");
    Files.writeString(foreign, "server = \"https://ghcr.io\"\n# mine\n");

    assertThat(
            run(
                "--dir",
                dir.toString(),
                "--cache",
                "http://127.0.0.1:30080",
                "--registry",
                "ghcr.io"))
        .isZero();

    assertThat(foreign).hasContent("server = \"https://ghcr.io\"\n# mine");
    assertThat(err.toString()).contains(foreign + " was not written by registry-cache: left alone");
  }

  @Test
  void filesAnEarlierVersionWroteAreItsOwnToReplaceAndRemove() throws IOException {
    String former =
        "# Written by registry-cache's node mirror generator (io.registrycache.admin.NodeMirrorHosts).\n"
            + "server = \"https://ghcr.io\"\n";
    Files.writeString(
        Files.createDirectories(dir.resolve("ghcr.io")).resolve("hosts.toml"), former);
    Files.writeString(
        Files.createDirectories(dir.resolve("quay.io")).resolve("hosts.toml"), former);

    assertThat(
            run(
                "--dir",
                dir.toString(),
                "--cache",
                "http://127.0.0.1:30080",
                "--registry",
                "ghcr.io"))
        .as(err.toString())
        .isZero();

    assertThat(files())
        .containsExactlyEntriesOf(
            Map.of("ghcr.io/hosts.toml", expected("ghcr.io", "https://ghcr.io", null)));
    assertThat(err.toString()).doesNotContain("left alone");
  }

  @Test
  void theAuthorizationHeaderComesFromAFileAndIsNotPrinted() throws IOException {
    Path secret =
        Files.writeString(Files.createTempFile("authorization", ""), "Basic bm9kZTpzM2NyZXQ=\n");
    try {
      assertThat(
              run(
                  "--dir",
                  dir.toString(),
                  "--cache",
                  "http://127.0.0.1:30080",
                  "--registry",
                  "ghcr.io",
                  "--authorization-file",
                  secret.toString()))
          .as(err.toString())
          .isZero();
    } finally {
      Files.delete(secret);
    }
    assertThat(files())
        .containsExactlyEntriesOf(
            Map.of(
                "ghcr.io/hosts.toml",
                expected("ghcr.io", "https://ghcr.io", "Basic bm9kZTpzM2NyZXQ=")));
    assertThat(out.toString() + err).doesNotContain("bm9kZTpzM2NyZXQ=");
  }

  @Test
  void wrongOptionsAreRefusedWithStatus2AndNothingWritten() throws IOException {
    assertThat(run("--dir", dir.toString(), "--cache", "http://127.0.0.1:30080")).isEqualTo(2);
    assertThat(run("--dir", dir.toString(), "--cache", "ftp://cache", "--registry", "ghcr.io"))
        .isEqualTo(2);
    assertThat(run("--dir", dir.toString(), "--cache", "http://c:1", "--registry", "../etc"))
        .isEqualTo(2);
    assertThat(run("--dir", dir.toString(), "--cache", "http://c:1", "--registry", "a/b"))
        .isEqualTo(2);
    assertThat(run("--dir", dir.toString(), "--remove", "--registry", "ghcr.io")).isEqualTo(2);
    assertThat(run("--cache", "http://c:1", "--registry", "ghcr.io")).isEqualTo(2);
    assertThat(
            run(
                "--dir",
                dir.toString(),
                "--cache",
                "http://c:1",
                "--registry",
                "ghcr.io",
                "--bogus"))
        .isEqualTo(2);
    assertThat(err.toString())
        .contains("Unknown option: '--bogus'")
        .contains("not a registry host name: ../etc");
    assertThat(files()).isEmpty();
  }

  @Test
  void registryHostsAndUrlsAreChecked() {
    assertThat(NodeMirrorHosts.Registry.parse("localhost:5000=http://localhost:5000"))
        .isEqualTo(
            new NodeMirrorHosts.Registry("localhost:5000", URI.create("http://localhost:5000")));
    assertThatThrownBy(() -> NodeMirrorHosts.Registry.parse("a..b"))
        .isInstanceOf(IllegalArgumentException.class);
    assertThatThrownBy(() -> NodeMirrorHosts.Registry.parse("ghcr.io=https://gh\"cr.io"))
        .isInstanceOf(IllegalArgumentException.class);
    assertThatThrownBy(() -> new NodeMirrorHosts(URI.create("http://cache:8080/?x=1"), null))
        .isInstanceOf(IllegalArgumentException.class);
    assertThatThrownBy(() -> new NodeMirrorHosts(URI.create("http://cache:8080"), "Basic \"x\""))
        .isInstanceOf(IllegalArgumentException.class);
  }
}
