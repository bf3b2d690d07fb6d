package io.registrycache;

import static org.assertj.core.api.Assertions.assertThat;

import java.time.Duration;
import java.util.Arrays;
import java.util.List;
import java.util.regex.Pattern;
import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.Test;
import org.testcontainers.DockerClientFactory;
import org.testcontainers.containers.GenericContainer;
import org.testcontainers.containers.wait.strategy.Wait;
import org.testcontainers.utility.DockerImageName;

/**
 * The service image's AOT cache (docker/aot-cache.sh, io.registrycache.startup.AotTraining): the
 * image's JVM options name it, a JVM that must map it ({@code -XX:AOTMode=on} refuses to start
 * otherwise) starts and answers, and nearly every class it loads comes from the cache. Prints the
 * counts and the start time (figures, not a pass/fail timing).
 */
class AotCacheIT {

  private static final String CACHE_OPTION = "-XX:AOTCache=/app/registry-cache.aot";
  private static final Pattern STARTED =
      Pattern.compile("Started RegistryCacheApplication in ([0-9.]+) seconds");

  @Test
  void theImageStartsWithItsAotCacheMapped() {
    Assumptions.assumeFalse(
        Boolean.getBoolean("registrycache.image.skip"),
        "service image not built (-Djib.skip=true): AotCacheIT skipped");
    String[] env =
        DockerClientFactory.instance()
            .client()
            .inspectImageCmd(ContainerImageIT.IMAGE)
            .exec()
            .getConfig()
            .getEnv();
    String options =
        Arrays.stream(env == null ? new String[0] : env)
            .filter(e -> e.startsWith("JAVA_TOOL_OPTIONS="))
            .map(e -> e.substring("JAVA_TOOL_OPTIONS=".length()))
            .findFirst()
            .orElse("");
    assertThat(options).contains(CACHE_OPTION);

    String logs;
    String classes;
    try (GenericContainer<?> service =
        new GenericContainer<>(DockerImageName.parse(ContainerImageIT.IMAGE))
            .withEnv(
                "JAVA_TOOL_OPTIONS",
                options + " -XX:AOTMode=on -Xlog:class+load=info:file=/tmp/classes.txt")
            .withEnv("REGISTRY_CACHE_ADMIN_WARMUPPULLS", "0")
            .withExposedPorts(8080, 8081)
            .waitingFor(
                Wait.forHttp("/v2/")
                    .forPort(8080)
                    .forStatusCode(200)
                    .withStartupTimeout(Duration.ofSeconds(90)))) {
      service.start();
      logs = service.getLogs();
      classes =
          service.copyFileFromContainer("/tmp/classes.txt", in -> new String(in.readAllBytes()));
    }
    List<String> loaded = classes.lines().filter(l -> l.contains(" source: ")).toList();
    long cached = loaded.stream().filter(l -> l.contains("source: shared objects file")).count();
    assertThat(loaded).hasSizeGreaterThan(5_000);
    assertThat(cached)
        .as("classes loaded from the AOT cache, of %d", loaded.size())
        .isGreaterThan(loaded.size() * 9L / 10);
    System.out.printf(
        "AotCacheIT: %d of %d classes from the AOT cache; started in %s s (Spring Boot's 'Started ... in')%n",
        cached,
        loaded.size(),
        STARTED.matcher(logs).results().map(m -> m.group(1)).findFirst().orElse("?"));
  }
}
