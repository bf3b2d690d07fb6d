package io.registrycache.it;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Arrays;
import java.util.Comparator;
import java.util.List;
import java.util.stream.Stream;

/** File-system helpers for checking the cache's storage directory. */
final class TestFiles {

  private TestFiles() {}

  /** Every regular file below {@code root} (empty when {@code root} does not exist). */
  static List<Path> regularFiles(Path root) {
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
  static List<Path> filesWithContent(Path root, byte[] bytes) {
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

  static void deleteRecursively(Path root) {
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
  static boolean eventually(long millis, java.util.function.BooleanSupplier condition) {
    long deadline = System.nanoTime() + millis * 1_000_000;
    while (true) {
      if (condition.getAsBoolean()) {
        return true;
      }
      if (System.nanoTime() > deadline) {
        return false;
      }
      try {
        Thread.sleep(50);
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
        return false;
      }
    }
  }
}
