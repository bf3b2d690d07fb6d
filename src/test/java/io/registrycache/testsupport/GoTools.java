package io.registrycache.testsupport;

import java.io.File;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Optional;
import org.awaitility.Awaitility;
import org.junit.jupiter.api.Assumptions;

/**
 * Finds Go-built tools ({@code go}, {@code oras}, {@code crane}, {@code helm}, {@code jaeger}) for
 * ITs: on PATH, in {@code ~/go/bin}, {@code /usr/local/bin} or {@code /usr/local/go/bin}. A missing
 * tool skips the test locally but fails it when the environment variable {@code CI} is set (CI
 * installs them).
 */
public final class GoTools {

  private GoTools() {}

  public static Optional<Path> find(String name) {
    List<String> dirs =
        new ArrayList<>(
            List.of(System.getenv().getOrDefault("PATH", "").split(File.pathSeparator)));
    dirs.add(System.getProperty("user.home") + "/go/bin");
    dirs.add("/usr/local/bin");
    dirs.add("/usr/local/go/bin");
    for (String dir : dirs) {
      if (!dir.isEmpty() && Files.isExecutable(Path.of(dir, name))) {
        return Optional.of(Path.of(dir, name));
      }
    }
    return Optional.empty();
  }

  /** One line naming how to install {@code name}: {@code .ci/go-tools.sh} for the tools it pins. */
  static String howToInstall(String name) {
    return switch (name) {
      case "crane", "oras", "cosign", "helm", "jaeger" ->
          "bash .ci/go-tools.sh " + name + " installs the pinned version";
      case "go" -> "install Go: /usr/local/go/bin or Debian's golang-go";
      default -> "go install it";
    };
  }

  /**
   * Where {@code .ci/go-tools.sh} marks a tool it is building ({@code <dir>/<name>}, removed when
   * the build ends): CI builds jaeger while the tests run.
   */
  static final Path BUILDING =
      Path.of(System.getenv().getOrDefault("GO_TOOLS_BUILDING", "/tmp/go-tools-building"));

  /**
   * Why a test that needs {@code name} is skipped here: the tool is not installed, not being built,
   * and CI is not set; empty otherwise (then {@link #require} finds it, waits for it or fails).
   */
  static Optional<String> missing(String name) {
    if (Command.inCi() || Files.exists(BUILDING.resolve(name)) || find(name).isPresent()) {
      return Optional.empty();
    }
    return Optional.of(name + " not installed (" + howToInstall(name) + ")");
  }

  /** The tool, or a skipped test (locally) / a failed one (under CI). */
  public static Path require(String name) {
    Path building = BUILDING.resolve(name);
    if (Files.exists(building)) {
      System.out.println(
          name + " is being built (" + building + "); waiting for it, 45 min at most");
      Awaitility.await(name + "'s build (.ci/go-tools.sh) to end")
          .atMost(Duration.ofMinutes(45))
          .pollInterval(Duration.ofSeconds(5))
          .until(() -> !Files.exists(building));
    }
    Optional<Path> tool = find(name);
    if (tool.isEmpty() && Command.inCi()) {
      throw new AssertionError(name + " is not installed, and CI is set: .ci/run must install it");
    }
    Assumptions.assumeTrue(tool.isPresent(), name + " not installed (" + howToInstall(name) + ")");
    return tool.get();
  }
}
