package io.registrycache;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import io.registrycache.testsupport.TestFiles;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import java.util.regex.Pattern;
import java.util.stream.Stream;
import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.Test;
import org.testcontainers.containers.BindMode;
import org.testcontainers.containers.GenericContainer;
import org.testcontainers.containers.wait.strategy.Wait;
import org.testcontainers.utility.DockerImageName;

/**
 * The service image's class-data archive (io.registrycache.admin.ClassDataArchive): the first
 * container on an empty cache volume makes it with a training start, the next container on the
 * same volume maps it. Prints both start times (a figure, not a pass/fail timing).
 */
class ClassDataArchiveIT {

  private static final Pattern STARTED = Pattern.compile("Started RegistryCacheApplication in ([0-9.]+) seconds");

  @Test
  void theFirstContainerMakesTheArchiveAndTheNextOneMapsIt() throws IOException {
    Assumptions.assumeFalse(
        Boolean.getBoolean("registrycache.image.skip"),
        "service image not built (-Djib.skip=true): ClassDataArchiveIT skipped");
    Path volume = TestFiles.tempDirectory("registry-cache-cds-");
    Path archive = volume.resolve(".jvm/registry-cache.jsa");

    String firstLogs;
    try (GenericContainer<?> first = service(volume)) {
      first.start();
      await("the archive written, or its training start failed").atMost(Duration.ofMinutes(3))
          .pollInterval(Duration.ofMillis(250))
          .untilAsserted(() -> assertThat(first.getLogs()).containsAnyOf("written (", "training start failed"));
      firstLogs = first.getLogs();
    }
    assertThat(firstLogs).contains("class data archive /var/lib/registry-cache/.jvm/registry-cache.jsa is not in use")
        .contains("the next start maps it").doesNotContain("training start failed");
    assertThat(archive).isRegularFile();
    assertThat(Files.size(archive)).isGreaterThan(10L << 20);
    try (Stream<Path> files = Files.list(archive.getParent())) {
      assertThat(files.map(p -> p.getFileName().toString()).toList()).containsExactly("registry-cache.jsa");
    }

    String secondLogs;
    try (GenericContainer<?> second = service(volume)) {
      second.start();
      secondLogs = second.getLogs();
    }
    assertThat(secondLogs).contains("class data archive /var/lib/registry-cache/.jvm/registry-cache.jsa is in use")
        .doesNotContain("making it with a training start");
    System.out.printf("ClassDataArchiveIT: start without the archive %s s, with it %s s (Spring Boot's 'Started ... in')%n",
        started(firstLogs), started(secondLogs));
  }

  @Test
  void aContainerWhoseMemoryLimitLeavesNoRoomForTheTrainingStartSkipsIt() throws IOException {
    Assumptions.assumeFalse(
        Boolean.getBoolean("registrycache.image.skip"),
        "service image not built (-Djib.skip=true): ClassDataArchiveIT skipped");
    Path volume = TestFiles.tempDirectory("registry-cache-cds-limited-");
    String logs;
    try (GenericContainer<?> limited = service(volume)
        .withCreateContainerCmdModifier(cmd -> cmd.getHostConfig().withMemory(512L << 20).withMemorySwap(512L << 20))) {
      limited.start();
      await("the archive refused for the memory limit").atMost(Duration.ofMinutes(1))
          .pollInterval(Duration.ofMillis(250))
          .untilAsserted(() -> assertThat(limited.getLogs()).contains("not made: the container's memory limit"));
      logs = limited.getLogs();
    }
    assertThat(logs).contains("not made: the container's memory limit leaves")
        .doesNotContain("making it with a training start");
    assertThat(volume.resolve(".jvm/registry-cache.jsa")).doesNotExist();
  }

  private static GenericContainer<?> service(Path volume) {
    return new GenericContainer<>(DockerImageName.parse(ContainerImageIT.IMAGE))
        // no pull comes in this test: a second of quiet is as quiet as the production 10 s
        .withEnv("REGISTRY_CACHE_ADMIN_CLASSDATATRAININGQUIET", "1s")
        .withExposedPorts(8080, 8081)
        .withFileSystemBind(volume.toString(), "/var/lib/registry-cache", BindMode.READ_WRITE)
        .waitingFor(
            Wait.forHttp("/actuator/health/readiness")
                .forPort(8081)
                .forStatusCode(200)
                .withStartupTimeout(Duration.ofSeconds(90)));
  }

  private static String started(String logs) {
    List<String> found = STARTED.matcher(logs).results().map(m -> m.group(1)).toList();
    return found.isEmpty() ? "?" : found.get(0);
  }
}
