package io.registrycache.testsupport;

import java.io.File;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Assumptions;

/** Runs an external client (skopeo, ctr) with a time limit and collects its output. */
public final class Command {

  private Command() {}

  /** Exit code and merged stdout+stderr. */
  public record Result(List<String> command, int exitCode, String output) {
    public Result assertSuccess() {
      if (exitCode != 0) {
        throw new AssertionError(
            String.join(" ", command) + " exited " + exitCode + ":\n" + output);
      }
      return this;
    }
  }

  /** Whether {@code name} is an executable on PATH. */
  public static boolean onPath(String name) {
    String path = System.getenv().getOrDefault("PATH", "");
    for (String dir : path.split(File.pathSeparator)) {
      if (!dir.isEmpty() && Files.isExecutable(Path.of(dir, name))) {
        return true;
      }
    }
    return false;
  }

  /**
   * Needs an external tool: in CI (environment variable {@code CI} set, as {@code .ci/run} runs) a
   * missing tool fails the test, so a green CI always means the client really ran; elsewhere the
   * test is skipped with {@code message}.
   */
  public static void requireTool(boolean available, String message) {
    requireTool(available, message, System.getenv("CI"));
  }

  static void requireTool(boolean available, String message, String ciVariable) {
    if (available) {
      return;
    }
    if (inCi(ciVariable)) {
      throw new AssertionError(message + " (CI is set: a missing client fails rather than skips)");
    }
    Assumptions.abort(message + " (skipped outside CI)");
  }

  /** Whether this runs in CI: {@code CI} is set to anything but empty or {@code false}. */
  public static boolean inCi() {
    return inCi(System.getenv("CI"));
  }

  private static boolean inCi(String ci) {
    return ci != null && !ci.isBlank() && !ci.equalsIgnoreCase("false");
  }

  public static Result run(Duration timeout, String... command) {
    return run(timeout, List.of(command));
  }

  public static Result run(Duration timeout, List<String> command) {
    return run(timeout, null, Map.of(), command);
  }

  /**
   * Runs {@code command} in {@code directory} (the JVM's working directory when {@code null}), with
   * {@code environment} added to (or overriding) the JVM's environment; killed after {@code
   * timeout}, which fails the test.
   */
  public static Result run(
      Duration timeout, Path directory, Map<String, String> environment, List<String> command) {
    try {
      ProcessBuilder builder =
          new ProcessBuilder(command)
              .redirectErrorStream(true)
              .redirectInput(ProcessBuilder.Redirect.from(new File("/dev/null")));
      if (directory != null) {
        builder.directory(directory.toFile());
      }
      builder.environment().putAll(environment);
      Process process = builder.start();
      // Output is small for these clients; read it fully after the process ends or is killed.
      StringBuilder out = new StringBuilder();
      Thread reader =
          new Thread(
              () -> {
                try {
                  out.append(
                      new String(process.getInputStream().readAllBytes(), StandardCharsets.UTF_8));
                } catch (IOException e) {
                  out.append("<output unreadable: ").append(e).append('>');
                }
              });
      reader.start();
      if (!process.waitFor(timeout.toMillis(), TimeUnit.MILLISECONDS)) {
        process.destroyForcibly();
        process.waitFor(5, TimeUnit.SECONDS);
        reader.join(5_000);
        throw new AssertionError(
            String.join(" ", command) + " did not finish within " + timeout + ":\n" + out);
      }
      reader.join(5_000);
      return new Result(command, process.exitValue(), out.toString());
    } catch (IOException e) {
      throw new IllegalStateException("cannot run " + command, e);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new IllegalStateException(e);
    }
  }
}
