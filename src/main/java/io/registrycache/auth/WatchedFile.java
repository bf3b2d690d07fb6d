package io.registrycache.auth;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.BasicFileAttributes;
import java.time.Duration;
import java.util.List;
import java.util.Objects;
import java.util.function.Function;
import java.util.function.LongSupplier;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * A small configuration file (htpasswd, robot tokens) parsed once and parsed again when it changes:
 * its modification time, size and file key are compared at most once per {@link #CHECK_INTERVAL},
 * when the value is asked for (no thread, no WatchService; a Kubernetes Secret volume's symlink
 * swap is seen as well). At start-up a file that cannot be read or parsed is an error; later, a
 * version that cannot be read or parsed is logged (the parser's message, which must not quote
 * secrets) and the previous version stays in use.
 *
 * @param <T> the parsed content
 */
final class WatchedFile<T> {

  /** How often the file's attributes are looked at, at most. */
  static final Duration CHECK_INTERVAL = Duration.ofSeconds(1);

  private static final Logger log = LoggerFactory.getLogger(WatchedFile.class);

  private final Path path;
  private final String property;
  private final Function<String, T> parser;
  private final LongSupplier nanoTime;
  private final Runnable onChange;
  private volatile T value;
  private volatile long checkedAt;
  private Object stamp;

  /**
   * Reads and parses the file.
   *
   * @param property the setting that named the file, for messages
   * @param onChange run after a new version was parsed and is in use
   * @throws IllegalStateException when the file cannot be read or parsed, naming the setting and
   *     the parser's reason
   */
  WatchedFile(
      Path path,
      String property,
      Function<String, T> parser,
      LongSupplier nanoTime,
      Runnable onChange) {
    this.path = path;
    this.property = property;
    this.parser = parser;
    this.nanoTime = nanoTime;
    this.onChange = onChange;
    try {
      this.stamp = stamp();
      this.value = parser.apply(Files.readString(path, StandardCharsets.UTF_8));
    } catch (IOException | RuntimeException e) {
      throw new IllegalStateException(property + " " + path + " cannot be used: " + reason(e), e);
    }
    this.checkedAt = nanoTime.getAsLong();
  }

  /** The content, read again first when the file changed (looked at most once per second). */
  T get() {
    long now = nanoTime.getAsLong();
    if (now - checkedAt >= CHECK_INTERVAL.toNanos()) {
      check(now);
    }
    return value;
  }

  private synchronized void check(long now) {
    if (now - checkedAt < CHECK_INTERVAL.toNanos()) {
      return;
    }
    checkedAt = now;
    try {
      Object current = stamp();
      if (current.equals(stamp)) {
        return;
      }
      stamp = current; // a broken version is reported once, not every second
      value = parser.apply(Files.readString(path, StandardCharsets.UTF_8));
      log.info("{} {} changed: reloaded", property, path);
      onChange.run();
    } catch (IOException | RuntimeException e) {
      log.error(
          "{} {} changed but cannot be used: {}; the previous version stays in use",
          property,
          path,
          reason(e));
    }
  }

  private Object stamp() throws IOException {
    BasicFileAttributes attributes = Files.readAttributes(path, BasicFileAttributes.class);
    return List.of(
        attributes.lastModifiedTime(),
        attributes.size(),
        Objects.requireNonNullElse(attributes.fileKey(), ""),
        path.toRealPath().toString());
  }

  private static String reason(Exception e) {
    return e instanceof IOException
        ? e.getClass().getSimpleName() + ": " + e.getMessage()
        : e.getMessage();
  }
}
