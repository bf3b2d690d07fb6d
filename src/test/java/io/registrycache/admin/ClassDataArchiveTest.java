package io.registrycache.admin;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import io.registrycache.metrics.PullActivity;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;

/** Which archive the JVM was asked for, and the training start's command line. */
class ClassDataArchiveTest {

  @Test
  void theLastSharedArchiveFileOptionNamesTheArchive() {
    assertThat(ClassDataArchive.archive(List.of("-Xmx192m", "-XX:SharedArchiveFile=/a.jsa", "-XX:SharedArchiveFile=/v/app.jsa")))
        .contains(Path.of("/v/app.jsa"));
  }

  @Test
  void noOptionOrABaseAndTopPairIsLeftAlone() {
    assertThat(ClassDataArchive.archive(List.of("-Xmx192m"))).isEmpty();
    assertThat(ClassDataArchive.archive(List.of("-XX:SharedArchiveFile=/base.jsa:/top.jsa"))).isEmpty();
    assertThat(ClassDataArchive.archive(List.of("-XX:SharedArchiveFile="))).isEmpty();
  }

  @Test
  void theContainersMemoryHeadroomIsItsLimitLessWhatItUses(@org.junit.jupiter.api.io.TempDir Path cgroup) throws Exception {
    java.nio.file.Files.writeString(cgroup.resolve("memory.max"), "536870912\n");
    java.nio.file.Files.writeString(cgroup.resolve("memory.current"), "209715200\n");
    assertThat(ClassDataArchive.containerHeadroom(cgroup)).contains(536870912L - 209715200L);

    java.nio.file.Files.writeString(cgroup.resolve("memory.max"), "max\n");
    assertThat(ClassDataArchive.containerHeadroom(cgroup)).isEmpty();
  }

  @Test
  void cgroupV1LimitsCountAndItsNoLimitValueDoesNot(@org.junit.jupiter.api.io.TempDir Path cgroup) throws Exception {
    java.nio.file.Files.createDirectories(cgroup.resolve("memory"));
    java.nio.file.Files.writeString(cgroup.resolve("memory/memory.limit_in_bytes"), "805306368\n");
    java.nio.file.Files.writeString(cgroup.resolve("memory/memory.usage_in_bytes"), "104857600\n");
    assertThat(ClassDataArchive.containerHeadroom(cgroup)).contains(805306368L - 104857600L);

    java.nio.file.Files.writeString(cgroup.resolve("memory/memory.limit_in_bytes"), "9223372036854771712\n");
    assertThat(ClassDataArchive.containerHeadroom(cgroup)).isEmpty();
  }

  @Test
  void noCgroupFilesMeansNoLimit(@org.junit.jupiter.api.io.TempDir Path cgroup) {
    assertThat(ClassDataArchive.containerHeadroom(cgroup)).isEmpty();
  }

  @Test
  void anArchiveThatDoesNotExistIsNotMapped() {
    assertThat(ClassDataArchive.isMapped(Path.of("/nonexistent/registry-cache.jsa"))).isFalse();
  }

  @Test
  void theTrainingStartKeepsTheJvmOptionsButItsOwnSharingOnesAndUsesAThrowAwayCacheAndItsOwnUpstream() {
    List<String> command = ClassDataArchive.trainingCommand(
        "/opt/java/bin/java",
        List.of("-Xmx192m", "-XX:SharedArchiveFile=/v/app.jsa", "-Xshare:auto", "-agentlib:jdwp=transport=dt_socket", "-Dx=y"),
        "/app/classpath/a.jar:/app/libs/b.jar",
        "io.registrycache.RegistryCacheApplication --server.port=9",
        Path.of("/v/app.jsa.training-1"),
        Path.of("/v/training-x"),
        40123);
    assertThat(command).containsExactly(
        "/opt/java/bin/java", "-Xmx192m", "-Dx=y",
        "-XX:ArchiveClassesAtExit=/v/app.jsa.training-1", "-Dregistry-cache.class-data-training=true",
        "-cp", "/app/classpath/a.jar:/app/libs/b.jar", "io.registrycache.RegistryCacheApplication",
        "--server.port=0", "--management.server.port=0",
        "--registry-cache.storage.type=filesystem", "--registry-cache.storage.path=/v/training-x/cache",
        "--registry-cache.upstreams.class-data-training.url=http://127.0.0.1:40123",
        "--registry-cache.default-upstream=class-data-training",
        "--registry-cache.auth.enabled=false", "--registry-cache.rate-limit.enabled=false",
        "--registry-cache.cluster.peers=", "--registry-cache.cluster.peers-dns=");
  }

  @Test
  void aJarStartTrainsWithTheSameJar() {
    List<String> command = ClassDataArchive.trainingCommand(
        "java", List.of(), "app/registry-cache.jar", "app/registry-cache.jar --server.port=9",
        Path.of("o.jsa"), Path.of("w"), 40123);
    assertThat(command).containsSubsequence("-jar", "app/registry-cache.jar", "--registry-cache.storage.type=filesystem");
  }

  @Test
  void theTrainingWaitsForAPullPortWithNothingInFlightAndNothingNew() throws Exception {
    PullActivity activity = new PullActivity();
    activity.started(); // a long blob transfer in flight
    CompletableFuture<Void> waited = CompletableFuture.runAsync(() -> {
      try {
        ClassDataArchive.awaitQuiet(activity::snapshot, Duration.ofMillis(200), Duration.ofMillis(20));
      } catch (InterruptedException e) {
        throw new IllegalStateException(e);
      }
    });

    await("the transfer in flight holds the training back for three quiet periods")
        .during(Duration.ofMillis(600))
        .atMost(Duration.ofSeconds(10))
        .pollInterval(Duration.ofMillis(20))
        .until(() -> !waited.isDone());
    activity.ended();
    for (int i = 0; i < 10; i++) { // pulls that keep arriving hold it back too
      activity.started();
      activity.ended();
      Thread.sleep(50);
    }
    assertThat(waited).isNotDone();

    waited.get(5, TimeUnit.SECONDS); // then 200 ms without a pull lets it go
  }
}
