package io.registrycache.testsupport;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.Arrays;
import java.util.Comparator;
import java.util.List;
import java.util.function.BooleanSupplier;
import java.util.stream.Stream;
import org.awaitility.Awaitility;
import org.awaitility.core.ConditionTimeoutException;

/** File-system helpers for checking the cache's storage directory. */
public final class TestFiles {

  private TestFiles() {}

  /** A new temporary directory, deleted when the JVM exits. */
  public static Path tempDirectory(String prefix) {
    try {
      Path dir = Files.createTempDirectory(prefix);
      Runtime.getRuntime().addShutdownHook(new Thread(() -> deleteRecursively(dir)));
      return dir;
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
  }

  /** Every regular file below {@code root} (empty when {@code root} does not exist). */
  public static List<Path> regularFiles(Path root) {
    if (!Files.exists(root)) {
      return List.of();
    }
    try (Stream<Path> files = Files.walk(root)) {
      return files.filter(Files::isRegularFile).toList();
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
  }

  /** Regular files below {@code root} whose content is exactly {@code bytes}. */
  public static List<Path> filesWithContent(Path root, byte[] bytes) {
    return regularFiles(root).stream()
        .filter(
            p -> {
              try {
                return Files.size(p) == bytes.length && Arrays.equals(Files.readAllBytes(p), bytes);
              } catch (IOException e) {
                return false; // vanished meanwhile
              }
            })
        .toList();
  }

  public static void deleteRecursively(Path root) {
    if (!Files.exists(root)) {
      return;
    }
    try (Stream<Path> files = Files.walk(root)) {
      files.sorted(Comparator.reverseOrder()).forEach(p -> p.toFile().delete());
    } catch (IOException e) {
      // best effort
    }
  }

  /** Polls {@code condition} for up to {@code millis}; returns whether it became true. */
  public static boolean eventually(long millis, BooleanSupplier condition) {
    try {
      Awaitility.await()
          .atMost(Duration.ofMillis(millis))
          .pollDelay(Duration.ZERO)
          .pollInterval(Duration.ofMillis(50))
          .until(condition::getAsBoolean);
      return true;
    } catch (ConditionTimeoutException notInTime) {
      return false;
    }
  }
}
