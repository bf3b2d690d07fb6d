package io.registrycache.admin;

import io.registrycache.config.AdminProperties;
import io.registrycache.metrics.PullActivity;
import jakarta.annotation.PreDestroy;
import java.io.IOException;
import java.lang.management.ManagementFactory;
import java.net.HttpURLConnection;
import java.net.URI;
import java.nio.charset.StandardCharsets;
import java.nio.file.AtomicMoveNotSupportedException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.concurrent.TimeUnit;
import java.util.function.Supplier;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import org.springframework.boot.SpringApplication;
import org.springframework.boot.availability.AvailabilityChangeEvent;
import org.springframework.boot.availability.ReadinessState;
import org.springframework.boot.context.event.ApplicationReadyEvent;
import org.springframework.boot.web.server.context.WebServerApplicationContext;
import org.springframework.context.ConfigurableApplicationContext;
import org.springframework.context.event.EventListener;
import org.springframework.stereotype.Component;
import org.springframework.util.FileSystemUtils;

/**
 * Makes the JVM's application class-data archive (AppCDS, JEP 310/350) that the next start maps,
 * so a restart of the service loads its ~10,000 classes from a memory-mapped archive instead of
 * parsing them from jars (4-6 s to about 2 s until the first pull is answered; docs/performance.md,
 * Start-up).
 *
 * <p>Active only when the JVM was started with {@code -XX:SharedArchiveFile=<file>} (one file:
 * the shipped image's {@code JAVA_TOOL_OPTIONS} name {@code /var/lib/registry-cache/.jvm/
 * registry-cache.jsa}, inside the cache volume so it outlives the container) and that file is not
 * mapped into this process: it does not exist yet, or it was made for other jars or another JVM
 * and the JVM refused it. Then, once the service is ready and its pull port has been quiet for
 * {@link #TRAINING_QUIET} (no pull request in flight and none started: {@link PullActivity}), it
 * runs a training start in a child JVM: the same {@code java}, JVM options and class path, with {@code
 * -XX:ArchiveClassesAtExit}, started as far as a real start goes (both servers listening, {@code
 * GET /v2/} and a manifest and a blob request answered), then it exits and the JVM writes the
 * classes it loaded. The child listens on free ports of its own, keeps an empty file-system cache
 * in a temporary folder beside the archive and is offline and unclustered, so it touches neither
 * this service's storage, ports and peers nor any upstream. It is skipped when the container's
 * memory limit leaves less than {@link #TRAINING_MEMORY_BYTES} free. The archive is written beside the target and moved into place when
 * complete; a failure is logged as a warning with the child's last output lines and leaves nothing
 * behind. (Spring's {@code -Dspring.context.exit=onRefresh} checkpoint would stop before the
 * servers start: ~0.3 s slower starts from its smaller archive.)
 *
 * <p>The class path must be jar files (the image's, or {@code java -Djarmode=tools -jar
 * registry-cache.jar extract}); classes a fat jar loads from its nested jars, or from folders
 * ({@code ./mvnw spring-boot:run}), cannot be archived.
 */
@Component
public class ClassDataArchive {

  private static final Logger log = LoggerFactory.getLogger(ClassDataArchive.class);

  /**
   * How long the pull port must have been quiet before the training starts, by default
   * ({@code registry-cache.admin.class-data-training-quiet}): its 10-20 s of CPU come second to pulls
   * (three replicas that trained at once on 2 cores were running when a 128 MiB pull through them
   * failed in CI; docs/operations.md).
   */
  static final Duration TRAINING_QUIET = Duration.ofSeconds(10);

  /** How often the pull port's activity is looked at while the training waits. */
  static final Duration QUIET_POLL = Duration.ofSeconds(1);

  /**
   * Memory a training start may need, bytes: its JVM peaks at 350-390 MiB while it writes the
   * archive (measured with the shipped options; metaspace and the archive buffer double up).
   */
  static final long TRAINING_MEMORY_BYTES = 448L << 20;

  /** How long a training start may take before it is stopped. */
  static final Duration TRAINING_TIMEOUT = Duration.ofMinutes(3);

  private static final String ARCHIVE_FLAG = "-XX:SharedArchiveFile=";

  /** The system property that makes a start a training start. */
  static final String TRAINING_PROPERTY = "registry-cache.class-data-training";

  /** The key of the upstream a training start pulls its synthetic image from ({@link TrainingUpstream}). */
  static final String TRAINING_UPSTREAM = "class-data-training";

  private final PullActivity activity;
  private final Duration trainingQuiet;
  private volatile Process training;

  /**
   * @param activity the pull port's requests, to wait for quiet
   * @param admin its {@code class-data-training-quiet}: how long no pull request must have been
   *     seen before a training start ({@link #TRAINING_QUIET} by default)
   */
  public ClassDataArchive(PullActivity activity, AdminProperties admin) {
    this.activity = activity;
    this.trainingQuiet = admin.classDataTrainingQuiet();
  }

  @EventListener(ApplicationReadyEvent.class)
  public void onReady(ApplicationReadyEvent event) {
    if (!Boolean.getBoolean(TRAINING_PROPERTY)) {
      trainIfNotMapped();
    }
  }

  /**
   * In a training start, once the application takes traffic (Spring Boot publishes readiness just
   * after {@link ApplicationReadyEvent}; {@code /v2/} answers 503 until then): the training pulls.
   */
  @EventListener
  public void onReadiness(AvailabilityChangeEvent<ReadinessState> event) {
    if (Boolean.getBoolean(TRAINING_PROPERTY) && event.getState() == ReadinessState.ACCEPTING_TRAFFIC
        && event.getSource() instanceof ConfigurableApplicationContext context) {
      endTrainingStart(context);
    }
  }

  /**
   * In the child: answers {@code GET /v2/}, pulls the synthetic image of {@link TrainingUpstream}
   * through the cache (manifest, then each blob: the cold path a first pull takes), then a
   * manifest and a blob request for content no upstream has (404s, through the OCI error path),
   * then exits; the status is 0 when {@code /v2/} answered (200, or 401 with a pass-through upstream).
   */
  private static void endTrainingStart(ConfigurableApplicationContext context) {
    Thread exit = new Thread(() -> {
      int status = 0;
      try {
        if (context instanceof WebServerApplicationContext web) {
          String base = "http://127.0.0.1:" + web.getWebServer().getPort() + "/v2/";
          int version = request("GET", base); // 401 where an upstream passes clients' credentials through
          status = version == 200 || version == 401 ? 0 : 2;
          pullThrough(context, base);
          request("GET", base + "training/unknown/manifests/latest");
          request("HEAD", base + "training/unknown/blobs/sha256:" + "0".repeat(64));
        }
      } catch (IOException e) {
        status = 2;
      }
      int exitStatus = status;
      System.exit(SpringApplication.exit(context, () -> exitStatus));
    }, "class-data-training-exit");
    exit.start();
  }

  /** Pulls {@link TrainingUpstream}'s image through the cache when the training upstream is configured. */
  private static void pullThrough(ConfigurableApplicationContext context, String base) {
    String url = context.getEnvironment().getProperty("registry-cache.upstreams." + TRAINING_UPSTREAM + ".url");
    if (url == null) {
      return;
    }
    try (TrainingUpstream upstream = TrainingUpstream.start(URI.create(url).getPort())) {
      String repository = base + TrainingUpstream.REPOSITORY;
      request("GET", repository + "/manifests/" + TrainingUpstream.TAG);
      for (String digest : upstream.blobDigests()) {
        request("GET", repository + "/blobs/" + digest);
      }
    } catch (IOException | RuntimeException e) {
      // The archive is made all the same, with fewer of the cold path's classes in it.
      log.info("class data training: the pull through the training upstream failed: {}", e.toString());
    }
  }

  /** A port free on 127.0.0.1 now, for the training upstream (taken meanwhile: the pull fails, the archive is made). */
  private static int freeLoopbackPort() throws IOException {
    try (java.net.ServerSocket socket = new java.net.ServerSocket(0, 1, java.net.InetAddress.getLoopbackAddress())) {
      return socket.getLocalPort();
    }
  }

  private static int request(String method, String url) throws IOException {
    HttpURLConnection connection = (HttpURLConnection) URI.create(url).toURL().openConnection();
    try {
      connection.setRequestMethod(method);
      connection.setConnectTimeout(10_000);
      connection.setReadTimeout(30_000);
      int status = connection.getResponseCode();
      if (status == 200 && !"HEAD".equals(method)) {
        try (var body = connection.getInputStream()) {
          body.transferTo(java.io.OutputStream.nullOutputStream()); // the whole body: the fill runs to its end
        }
      }
      return status;
    } finally {
      connection.disconnect();
    }
  }

  private void trainIfNotMapped() {
    Optional<Path> archive = archive(ManagementFactory.getRuntimeMXBean().getInputArguments());
    if (archive.isEmpty()) {
      return;
    }
    if (isMapped(archive.get())) {
      log.info("class data archive {} is in use", archive.get());
      return;
    }
    Thread thread = new Thread(() -> {
      try {
        awaitQuiet(activity::snapshot, trainingQuiet, QUIET_POLL);
        train(archive.get());
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
      }
    }, "class-data-archive");
    thread.setDaemon(true);
    thread.start();
  }

  /**
   * Returns once {@code activity} has shown no pull request in flight and none started for {@code
   * quiet}, looked at every {@code poll}; waits as long as that takes.
   */
  static void awaitQuiet(Supplier<PullActivity.Snapshot> activity, Duration quiet, Duration poll)
      throws InterruptedException {
    PullActivity.Snapshot last = activity.get();
    long quietSince = System.nanoTime();
    while (true) {
      Thread.sleep(poll.toMillis());
      PullActivity.Snapshot now = activity.get();
      if (!now.equals(last) || !now.idle()) {
        last = now;
        quietSince = System.nanoTime();
      } else if (System.nanoTime() - quietSince >= quiet.toNanos()) {
        return;
      }
    }
  }

  /** Stops a training start still running when the service stops. */
  @PreDestroy
  public void stop() {
    Process p = training;
    if (p != null) {
      p.destroyForcibly();
    }
  }

  /**
   * The archive this JVM was asked to map: the last {@code -XX:SharedArchiveFile} of its input
   * arguments (which include {@code JAVA_TOOL_OPTIONS}); empty when there is none or it names a
   * base and a top archive ({@code a.jsa:b.jsa}), which are made by hand.
   */
  static Optional<Path> archive(List<String> jvmArguments) {
    String file = null;
    for (String argument : jvmArguments) {
      if (argument.startsWith(ARCHIVE_FLAG)) {
        file = argument.substring(ARCHIVE_FLAG.length());
      }
    }
    if (file == null || file.isBlank() || file.contains(java.io.File.pathSeparator)) {
      return Optional.empty();
    }
    return Optional.of(Path.of(file).toAbsolutePath().normalize());
  }

  /** True when {@code archive} is mapped into this process ({@code /proc/self/maps}, Linux). */
  static boolean isMapped(Path archive) {
    try {
      String target = archive.toRealPath().toString();
      for (String line : Files.readAllLines(Path.of("/proc/self/maps"), StandardCharsets.UTF_8)) {
        if (line.endsWith(" " + target)) {
          return true;
        }
      }
      return false;
    } catch (IOException e) {
      return false; // no archive file yet, or not Linux: train (the JVM maps a valid one anyway)
    }
  }

  /**
   * The child JVM's command: {@code java}, this JVM's options without its class-data-sharing ones,
   * {@code -XX:ArchiveClassesAtExit=<output>}, the training property, the class path and main class
   * (or {@code -jar}) of this JVM, and settings for free ports, offline, unclustered, with a
   * throw-away file-system cache in {@code work}.
   */
  static List<String> trainingCommand(
      String java, List<String> jvmArguments, String classPath, String javaCommand, Path output, Path work,
      int upstreamPort) {
    List<String> command = new ArrayList<>();
    command.add(java);
    for (String argument : jvmArguments) {
      if (!argument.startsWith(ARCHIVE_FLAG)
          && !argument.startsWith("-Xshare:")
          && !argument.startsWith("-XX:ArchiveClassesAtExit")
          && !argument.startsWith("-XX:+AutoCreateSharedArchive")
          && !argument.startsWith("-agentlib:jdwp")
          && !argument.startsWith("-D" + TRAINING_PROPERTY)) {
        command.add(argument);
      }
    }
    command.add("-XX:ArchiveClassesAtExit=" + output);
    command.add("-D" + TRAINING_PROPERTY + "=true");
    String main = javaCommand.strip().split("\\s+", 2)[0];
    if (main.endsWith(".jar")) {
      command.add("-jar");
      command.add(main);
    } else {
      command.add("-cp");
      command.add(classPath);
      command.add(main);
    }
    command.addAll(List.of(
        "--server.port=0",
        "--management.server.port=0",
        "--registry-cache.storage.type=filesystem",
        "--registry-cache.storage.path=" + work.resolve("cache"),
        // Its one upstream is the synthetic one on loopback (no request leaves the machine); the
        // pull port open, so that the training pull takes the anonymous path.
        "--registry-cache.upstreams." + TRAINING_UPSTREAM + ".url=http://127.0.0.1:" + upstreamPort,
        "--registry-cache.default-upstream=" + TRAINING_UPSTREAM,
        "--registry-cache.auth.enabled=false",
        "--registry-cache.rate-limit.enabled=false",
        "--registry-cache.cluster.peers=",
        "--registry-cache.cluster.peers-dns="));
    return command;
  }

  /**
   * Free memory under the container's limit, bytes: cgroup v2 {@code memory.max} minus {@code
   * memory.current} (or v1 {@code memory.limit_in_bytes} minus {@code memory.usage_in_bytes});
   * empty when there is no limit or no cgroup file to read.
   */
  static Optional<Long> containerHeadroom(Path cgroupRoot) {
    Optional<Long> v2 = headroom(cgroupRoot.resolve("memory.max"), cgroupRoot.resolve("memory.current"));
    return v2.isPresent()
        ? v2
        : headroom(cgroupRoot.resolve("memory/memory.limit_in_bytes"), cgroupRoot.resolve("memory/memory.usage_in_bytes"));
  }

  private static Optional<Long> headroom(Path limitFile, Path usageFile) {
    try {
      String limit = Files.readString(limitFile).strip();
      if (limit.equals("max") || limit.isEmpty()) {
        return Optional.empty();
      }
      long max = Long.parseLong(limit);
      if (max >= Long.MAX_VALUE / 2) { // cgroup v1 "no limit" is a huge number
        return Optional.empty();
      }
      return Optional.of(max - Long.parseLong(Files.readString(usageFile).strip()));
    } catch (IOException | NumberFormatException e) {
      return Optional.empty();
    }
  }

  private void train(Path archive) {
    Optional<Long> headroom = containerHeadroom(Path.of("/sys/fs/cgroup"));
    if (headroom.isPresent() && headroom.get() < TRAINING_MEMORY_BYTES) {
      log.info("class data archive {} not made: the container's memory limit leaves {} MiB free and a training start "
              + "needs up to {} MiB; raise the limit for one start to have it made (docs/operations.md)",
          archive, headroom.get() >> 20, TRAINING_MEMORY_BYTES >> 20);
      return;
    }
    long start = System.nanoTime();
    Path work = null;
    Path partial = archive.resolveSibling(archive.getFileName() + ".training-" + ProcessHandle.current().pid());
    try {
      Files.createDirectories(archive.getParent());
      // Beside the archive, not in /tmp: a read-only root file system may leave /tmp small.
      work = Files.createTempDirectory(archive.getParent(), "training-");
      Path output = work.resolve("training.log");
      List<String> command = trainingCommand(
          ProcessHandle.current().info().command().orElse(Path.of(System.getProperty("java.home"), "bin", "java").toString()),
          ManagementFactory.getRuntimeMXBean().getInputArguments(),
          System.getProperty("java.class.path"),
          System.getProperty("sun.java.command", ""),
          partial,
          work,
          freeLoopbackPort());
      ProcessBuilder builder = new ProcessBuilder(command).redirectErrorStream(true).redirectOutput(output.toFile());
      Map<String, String> environment = builder.environment();
      // Their options are among this JVM's input arguments already, the archive one removed.
      environment.remove("JAVA_TOOL_OPTIONS");
      environment.remove("JDK_JAVA_OPTIONS");
      log.info("class data archive {} is not in use: making it with a training start", archive);
      Process process = builder.start();
      training = process;
      boolean ended = process.waitFor(TRAINING_TIMEOUT.toMillis(), TimeUnit.MILLISECONDS);
      if (!ended) {
        process.destroyForcibly();
      }
      if (!ended || process.exitValue() != 0 || !Files.isRegularFile(partial) || Files.size(partial) == 0) {
        log.warn("class data archive {}: the training start failed ({}); the service starts without it. Last output: {}",
            archive, ended ? "exit " + process.exitValue() : "timed out", tail(output));
        return;
      }
      long bytes = Files.size(partial);
      try {
        Files.move(partial, archive, StandardCopyOption.REPLACE_EXISTING, StandardCopyOption.ATOMIC_MOVE);
      } catch (AtomicMoveNotSupportedException e) {
        Files.move(partial, archive, StandardCopyOption.REPLACE_EXISTING);
      }
      // Cleaned up before the line that says it is done: whoever waits for that line (an operator,
      // ClassDataArchiveIT on a loaded machine) finds only the archive beside it.
      FileSystemUtils.deleteRecursively(work);
      work = null;
      log.info("class data archive {} written ({} MiB, {} ms); the next start maps it",
          archive, bytes >> 20, (System.nanoTime() - start) / 1_000_000);
    } catch (IOException e) {
      log.warn("class data archive {}: cannot make it: {}", archive, e.toString());
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    } finally {
      training = null;
      try {
        Files.deleteIfExists(partial);
        if (work != null) {
          FileSystemUtils.deleteRecursively(work);
        }
      } catch (IOException e) {
        log.debug("class data archive: cleaning up {} failed", work, e);
      }
    }
  }

  private static String tail(Path output) {
    try {
      List<String> lines = Files.readAllLines(output, StandardCharsets.UTF_8);
      return String.join(" | ", lines.subList(Math.max(0, lines.size() - 5), lines.size()));
    } catch (IOException e) {
      return "(none)";
    }
  }
}
