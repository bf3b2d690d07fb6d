package io.registrycache.testsupport;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;

/**
 * containerd as a real client: its {@code ctr} against the containerd that runs under dockerd, in a
 * namespace of its own, with a {@code hosts.toml} that makes the cache a mirror of an upstream host
 * (so containerd sends the {@code ?ns=<host>} form). Fails (in CI) or skips (elsewhere) through
 * {@link Command#requireTool} when ctr or the socket is missing.
 */
public final class Containerd {

  public static final String SOCKET =
      System.getProperty(
          "registrycache.containerd.socket", "/var/run/docker/containerd/containerd.sock");
  public static final String NAMESPACE = "registry-cache-test";

  private final List<String> pulled = new ArrayList<>();

  /** Requires ctr on the PATH and a containerd answering on {@link #SOCKET}. */
  public static void require() {
    Command.requireTool(
        Command.onPath("ctr"), "containerd's ctr is not installed (comes with docker.io)");
    Command.requireTool(Files.exists(Path.of(SOCKET)), "no containerd socket at " + SOCKET);
    Command.Result version = Command.run(Duration.ofSeconds(20), "ctr", "-a", SOCKET, "version");
    Command.requireTool(
        version.exitCode() == 0,
        "containerd at " + SOCKET + " does not answer: " + version.output());
  }

  /** {@code ctr -a <socket> -n <namespace> args…}, 150 s at most. */
  public Command.Result ctr(String... args) {
    List<String> command = new ArrayList<>(List.of("ctr", "-a", SOCKET, "-n", NAMESPACE));
    command.addAll(List.of(args));
    return Command.run(Duration.ofSeconds(150), command);
  }

  /**
   * Writes {@code <hostsDir>/<upstreamHost>/hosts.toml} naming the cache at {@code
   * http://localhost:<cachePort>} as the mirror (pull and resolve) of {@code upstreamHost}.
   */
  public static void writeHostsToml(Path hostsDir, String upstreamHost, int cachePort)
      throws IOException {
    writeHostsToml(hostsDir, upstreamHost, cachePort, null);
  }

  /**
   * As {@link #writeHostsToml(Path, String, int)}, with a fixed {@code authorization} header for
   * the mirror ({@code [host."…".header]}: the only credentials containerd can send a mirror), or
   * none when {@code authorization} is null.
   */
  public static void writeHostsToml(
      Path hostsDir, String upstreamHost, int cachePort, String authorization) throws IOException {
    Path dir = Files.createDirectories(hostsDir.resolve(upstreamHost));
    String host = "http://localhost:" + cachePort;
    Files.writeString(
        dir.resolve("hosts.toml"),
        "server = \"http://"
            + upstreamHost
            + "\"\n\n"
            + "[host.\""
            + host
            + "\"]\n"
            + "  capabilities = [\"pull\", \"resolve\"]\n"
            + (authorization == null
                ? ""
                : "  [host.\""
                    + host
                    + "\".header]\n    authorization = \""
                    + authorization
                    + "\"\n"));
  }

  /**
   * {@code ctr images pull --plain-http --hosts-dir …} of {@code ref}; removed again by {@link
   * #removePulled}.
   */
  public Command.Result pull(Path hostsDir, String ref) {
    pulled.add(ref);
    return ctr(
        "--debug", "images", "pull", "--plain-http", "--hosts-dir", hostsDir.toString(), ref);
  }

  /**
   * {@link #pull(Path, String)} of one platform of an image index ({@code --platform}, e.g. {@code
   * linux/arm64}): containerd fetches the index, then that platform's manifest and its blobs.
   */
  public Command.Result pull(Path hostsDir, String ref, String platform) {
    pulled.add(ref);
    return ctr(
        "--debug",
        "images",
        "pull",
        "--plain-http",
        "--platform",
        platform,
        "--hosts-dir",
        hostsDir.toString(),
        ref);
  }

  /**
   * Whether {@code ctr images check} lists {@code ref} as complete: every blob present, which
   * containerd only keeps after checking its digest.
   */
  public boolean complete(String ref) {
    Command.Result check = ctr("images", "check");
    return check
        .output()
        .lines()
        .filter(l -> l.startsWith(ref))
        .findFirst()
        .orElse("")
        .contains("complete");
  }

  /** Removes the images pulled (and their content) from the test namespace. */
  public void removePulled() {
    for (String ref : pulled) {
      Command.run(
          Duration.ofSeconds(60),
          "ctr",
          "-a",
          SOCKET,
          "-n",
          NAMESPACE,
          "images",
          "rm",
          "--sync",
          ref);
    }
    pulled.clear();
  }
}
