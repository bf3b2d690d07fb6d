package io.registrycache.proxy;

import static org.assertj.core.api.Assertions.assertThat;

import io.registrycache.testsupport.CacheProperties;
import io.registrycache.testsupport.Command;
import io.registrycache.testsupport.GoTools;
import io.registrycache.testsupport.ManualCache;
import io.registrycache.testsupport.Sha256;
import io.registrycache.testsupport.TestImages;
import io.registrycache.testsupport.UpstreamRegistryContainer;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.stream.Stream;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * Non-image OCI content through the cache with the real clients: a Helm chart the test packages and
 * {@code helm push}es to {@code registry:2}, then {@code helm pull oci://<cache>/upstream.test/...}
 * (the in-path form) and {@code helm template}; and an {@code oras push}ed artifact (an artifact
 * type and one file of a custom media type) {@code oras pull}ed through the cache. Both are
 * byte-exact, and byte-exact again with the upstream stopped: served from the cache (the tags are
 * within the default {@code tag-ttl}, 5 min, so the stopped upstream is not even asked). helm 3 and
 * oras 1.2 ({@code .ci/go-tools.sh}): skipped without them locally, failed under CI.
 */
class ArtifactPullIT {

  static final String HOST = CacheProperties.UPSTREAM_HOST;
  static final Duration CLIENT_TIMEOUT = Duration.ofMinutes(2);

  // its own registry: this test stops it
  static final UpstreamRegistryContainer upstream = new UpstreamRegistryContainer();

  @TempDir static Path storage;

  static ManualCache service;

  @BeforeAll
  static void start() {
    upstream.start();
    service =
        ManualCache.start(CacheProperties.cache(storage).localUpstream(HOST, upstream::baseUrl));
  }

  @AfterAll
  static void stop() {
    if (service != null) {
      service.close();
    }
    upstream.stop();
  }

  @Test
  void aHelmChartIsPulledThroughTheCacheByteExactAlsoWithTheUpstreamStopped(@TempDir Path work)
      throws IOException {
    Path helm = GoTools.require("helm");
    String greeting = "hello from " + TestImages.uniqueRepository("chart");
    Path chart = Files.createDirectories(work.resolve("src/mychart"));
    Files.writeString(
        chart.resolve("Chart.yaml"),
        """
        apiVersion: v2
        name: mychart
        description: a chart made by ArtifactPullIT
        type: application
        version: 0.3.1
        """);
    Files.writeString(chart.resolve("values.yaml"), "greeting: \"" + greeting + "\"\n");
    Files.createDirectories(chart.resolve("templates"));
    Files.writeString(
        chart.resolve("templates/configmap.yaml"),
        """
        apiVersion: v1
        kind: ConfigMap
        metadata:
          name: {{ .Release.Name }}-greeting
        data:
          greeting: {{ .Values.greeting | quote }}
        """);
    Path packaged = Files.createDirectories(work.resolve("packaged"));
    helm(helm, work, "package", chart.toString(), "--destination", packaged.toString());
    Path tgz = packaged.resolve("mychart-0.3.1.tgz");
    assertThat(tgz).isRegularFile();
    String repository = TestImages.uniqueRepository("charts");
    helm(
        helm,
        work,
        "push",
        tgz.toString(),
        "oci://" + upstream.hostAndPort() + "/" + repository,
        "--plain-http");

    String throughCache = "oci://localhost:" + port() + "/" + HOST + "/" + repository + "/mychart";
    Path pulled = helmPull(helm, work, throughCache, "online");
    assertThat(Sha256.digest(pulled)).isEqualTo(Sha256.digest(tgz));
    Command.Result rendered = helm(helm, work, "template", "rel", pulled.toString());
    assertThat(rendered.output())
        .contains("kind: ConfigMap", "name: rel-greeting", "greeting: \"" + greeting + "\"");

    awaitDownloadsCommitted();
    upstream.stopUpstream();
    try {
      Path offline = helmPull(helm, work, throughCache, "offline");
      assertThat(Sha256.digest(offline)).isEqualTo(Sha256.digest(tgz));
      // helm install and template resolve the oci:// reference themselves, as helm pull does
      Command.Result fromReference =
          helm(
              helm, work, "template", "direct", throughCache, "--version", "0.3.1", "--plain-http");
      assertThat(fromReference.output())
          .contains("name: direct-greeting", "greeting: \"" + greeting + "\"");
    } finally {
      upstream.startUpstream();
    }
  }

  @Test
  void anOrasArtifactIsPulledThroughTheCacheByteExactAlsoWithTheUpstreamStopped(@TempDir Path work)
      throws IOException {
    Path oras = GoTools.require("oras");
    Path pushed = Files.createDirectories(work.resolve("pushed"));
    byte[] note =
        ("a note that is no image, " + TestImages.uniqueRepository("note") + "\n")
            .getBytes(StandardCharsets.UTF_8);
    Files.write(pushed.resolve("file.txt"), note);
    String repository = TestImages.uniqueRepository("artifacts") + "/notes";
    // relative file name: oras records it as the layer's title and refuses absolute paths
    Command.run(
            CLIENT_TIMEOUT,
            pushed,
            Map.of(),
            List.of(
                oras.toString(),
                "push",
                "--plain-http",
                "--artifact-type",
                "application/vnd.example.note",
                upstream.hostAndPort() + "/" + repository + ":v1",
                "file.txt:application/vnd.example.note.v1"))
        .assertSuccess();

    String throughCache = "localhost:" + port() + "/" + HOST + "/" + repository + ":v1";
    assertThat(orasPull(oras, work, throughCache, "online")).containsExactly(Path.of("file.txt"));
    assertThat(work.resolve("online/file.txt")).hasBinaryContent(note);
    // the manifest as the upstream has it (artifactType and the layer's media type), byte for byte
    String manifest = orasManifest(oras, work, upstream.hostAndPort() + "/" + repository + ":v1");
    assertThat(manifest)
        .contains(
            "\"artifactType\":\"application/vnd.example.note\"",
            "\"mediaType\":\"application/vnd.example.note.v1\"",
            Sha256.digest(note));
    assertThat(orasManifest(oras, work, throughCache)).isEqualTo(manifest);

    awaitDownloadsCommitted();
    upstream.stopUpstream();
    try {
      assertThat(orasPull(oras, work, throughCache, "offline"))
          .containsExactly(Path.of("file.txt"));
      assertThat(work.resolve("offline/file.txt")).hasBinaryContent(note);
      assertThat(orasManifest(oras, work, throughCache)).isEqualTo(manifest);
    } finally {
      upstream.startUpstream();
    }
  }

  private static int port() {
    return Integer.parseInt(
        service.context().getEnvironment().getRequiredProperty("local.server.port"));
  }

  /**
   * The clients end when they have the last byte, the cache commits the blob just after: what the
   * upstream-stopped pull needs must be in the store before the upstream goes.
   */
  private static void awaitDownloadsCommitted() {
    service.awaitDownloadsCommitted();
  }

  /**
   * {@code helm pull ... --plain-http} into {@code work/<into>}, a fresh folder; the .tgz pulled.
   */
  private static Path helmPull(Path helm, Path work, String reference, String into)
      throws IOException {
    Path destination = Files.createDirectories(work.resolve(into));
    helm(
        helm,
        work,
        "pull",
        reference,
        "--version",
        "0.3.1",
        "--plain-http",
        "--destination",
        destination.toString());
    return destination.resolve("mychart-0.3.1.tgz");
  }

  /**
   * helm with its home folders (config, registry logins, cache) in {@code work/helm-home}, none of
   * the user's; fails the test when helm fails.
   */
  private static Command.Result helm(Path helm, Path work, String... args) {
    Path home = work.resolve("helm-home");
    List<String> command = new ArrayList<>(List.of(helm.toString()));
    command.addAll(List.of(args));
    return Command.run(
            CLIENT_TIMEOUT,
            work,
            Map.of(
                "HELM_CONFIG_HOME", home.resolve("config").toString(),
                "HELM_CACHE_HOME", home.resolve("cache").toString(),
                "HELM_DATA_HOME", home.resolve("data").toString()),
            command)
        .assertSuccess();
  }

  /** {@code oras manifest fetch --plain-http}: the manifest's bytes as text. */
  private static String orasManifest(Path oras, Path work, String reference) {
    return Command.run(
            CLIENT_TIMEOUT,
            work,
            Map.of(),
            List.of(oras.toString(), "manifest", "fetch", "--plain-http", reference))
        .assertSuccess()
        .output();
  }

  /**
   * {@code oras pull --plain-http} into {@code work/<into>}, a fresh folder; the files it wrote,
   * relative.
   */
  private static List<Path> orasPull(Path oras, Path work, String reference, String into)
      throws IOException {
    Path destination = Files.createDirectories(work.resolve(into));
    Command.run(
            CLIENT_TIMEOUT,
            work,
            Map.of(),
            List.of(
                oras.toString(),
                "pull",
                "--plain-http",
                "--output",
                destination.toString(),
                reference))
        .assertSuccess();
    try (Stream<Path> files = Files.walk(destination)) {
      return files.filter(Files::isRegularFile).map(destination::relativize).toList();
    }
  }
}
