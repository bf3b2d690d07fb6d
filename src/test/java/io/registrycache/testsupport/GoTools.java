package io.registrycache.testsupport;

import java.io.File;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Optional;
import org.junit.jupiter.api.Assumptions;

/**
 * Finds Go-built tools ({@code go}, {@code oras}, {@code crane}, {@code helm}, {@code jaeger}) for ITs: on PATH, in {@code ~/go/bin}, {@code
 * /usr/local/bin} or {@code /usr/local/go/bin}. A missing tool skips the test locally but fails
 * it when the environment variable {@code CI} is set (CI installs them).
 */
public final class GoTools {

  private GoTools() {}

  public static Optional<Path> find(String name) {
    List<String> dirs = new ArrayList<>(List.of(System.getenv().getOrDefault("PATH", "").split(File.pathSeparator)));
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
      case "crane", "oras", "cosign", "helm", "jaeger" -> "bash .ci/go-tools.sh " + name + " installs the pinned version";
      case "go" -> "install Go: /usr/local/go/bin or Debian's golang-go";
      default -> "go install it";
    };
  }

  /** The tool, or a skipped test (locally) / a failed one (under CI). */
  public static Path require(String name) {
    Optional<Path> tool = find(name);
    if (tool.isEmpty() && System.getenv("CI") != null) {
      throw new AssertionError(name + " is not installed, and CI is set: .ci/run must install it");
    }
    Assumptions.assumeTrue(tool.isPresent(), name + " not installed (" + howToInstall(name) + ")");
    return tool.get();
  }
}
