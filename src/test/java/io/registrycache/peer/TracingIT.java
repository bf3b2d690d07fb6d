package io.registrycache.peer;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import io.registrycache.cluster.Member;
import io.registrycache.cluster.RendezvousHashing;
import io.registrycache.testsupport.CacheProperties;
import io.registrycache.testsupport.FreePorts;
import io.registrycache.testsupport.GoTools;
import io.registrycache.testsupport.ManualCache;
import io.registrycache.testsupport.NeedsGoTool;
import io.registrycache.testsupport.Sha256;
import io.registrycache.testsupport.TestFiles;
import io.registrycache.testsupport.TestImages;
import io.registrycache.testsupport.TestImages.Image;
import io.registrycache.testsupport.UpstreamRegistryContainer;
import java.io.IOException;
import java.net.URI;
import java.net.URLEncoder;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import org.awaitility.core.ConditionTimeoutException;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import tools.jackson.databind.JsonNode;
import tools.jackson.databind.json.JsonMapper;

/**
 * A cold pull through two replicas is one trace per request in a real Jaeger (v1.76.0, built from
 * the Go module proxy: {@code bash .ci/go-tools.sh jaeger}), received over OTLP/HTTP and read back
 * from Jaeger's query API. Replica A serves the pull; a blob owned by replica B is fetched by A
 * from B's peer port, and B continues A's trace (W3C {@code traceparent}), so the trace holds A's
 * {@code pull blob}, its {@code peer fetch}, B's {@code peer serve blob}, B's {@code upstream blob}
 * exchange, both replicas' {@code blob body} and {@code storage commit}. Prefetch is off here, so
 * every blob's fill is started by the client's request.
 */
@NeedsGoTool("jaeger")
class TracingIT {

  static final String TOKEN = "tracing-it-token-" + TestImages.RUN_ID + "-0123456789";
  static final String SERVICE_A = "registry-cache-a-" + TestImages.RUN_ID;
  static final String SERVICE_B = "registry-cache-b-" + TestImages.RUN_ID;

  static final UpstreamRegistryContainer upstream = UpstreamRegistryContainer.started();
  static final List<Member> members = new ArrayList<>();
  static final List<ManualCache> replicas = new ArrayList<>();
  static final HttpClient http = HttpClient.newHttpClient();
  static final JsonMapper json = JsonMapper.builder().build();

  @TempDir static Path work;
  static Process jaeger;
  static Path jaegerLog;
  static String query;

  @BeforeAll
  static void start() throws Exception {
    Path binary = GoTools.require("jaeger");
    List<Integer> ports = FreePorts.take(5);
    int otlp = ports.get(0);
    query = "http://127.0.0.1:" + ports.get(1);
    // Jaeger v2 (an OpenTelemetry Collector): OTLP/HTTP in, memory storage, the query API; every
    // port free.
    Path config = work.resolve("jaeger.yaml");
    Files.writeString(
        config,
        """
        service:
          extensions: [jaeger_storage, jaeger_query]
          pipelines:
            traces:
              receivers: [otlp]
              processors: [batch]
              exporters: [jaeger_storage_exporter]
          telemetry:
            metrics:
              level: none
        extensions:
          jaeger_storage:
            backends:
              memory_store:
                memory:
                  max_traces: 10000
          jaeger_query:
            storage:
              traces: memory_store
            http:
              endpoint: 127.0.0.1:%d
            grpc:
              endpoint: 127.0.0.1:%d
        receivers:
          otlp:
            protocols:
              http:
                endpoint: 127.0.0.1:%d
        processors:
          batch:
            timeout: 100ms
        exporters:
          jaeger_storage_exporter:
            trace_storage: memory_store
        """
            .formatted(ports.get(1), ports.get(2), otlp));
    jaegerLog = work.resolve("jaeger.log");
    jaeger =
        new ProcessBuilder(binary.toString(), "--config", config.toString())
            .redirectErrorStream(true)
            .redirectOutput(jaegerLog.toFile())
            .start();
    try {
      await("jaeger's query API answering")
          .atMost(Duration.ofSeconds(60))
          .pollDelay(Duration.ZERO)
          .pollInterval(Duration.ofMillis(200))
          .ignoreExceptionsInstanceOf(IOException.class) // not listening yet
          .until(() -> get(query + "/api/services").statusCode() == 200);
    } catch (ConditionTimeoutException notStarted) {
      throw new IllegalStateException(
          "jaeger did not start:\n" + Files.readString(jaegerLog), notStarted);
    }

    members.add(new Member("127.0.0.1", ports.get(3)));
    members.add(new Member("127.0.0.1", ports.get(4)));
    String peers = members.get(0).id() + "," + members.get(1).id();
    for (int i = 0; i < 2; i++) {
      replicas.add(
          ManualCache.start(
              CacheProperties.cache(TestFiles.tempDirectory("registry-cache-tracing-" + i + "-"))
                  .localUpstream(upstream::baseUrl)
                  .set("spring.application.name", i == 0 ? SERVICE_A : SERVICE_B)
                  .set("registry-cache.cluster.peers", peers)
                  .set("registry-cache.cluster.peer-port", members.get(i).port())
                  .set("registry-cache.cluster.peer-address", "127.0.0.1")
                  .set("registry-cache.cluster.self", members.get(i).id())
                  .set("registry-cache.cluster.token", TOKEN)
                  .set("registry-cache.blobs.prefetch.enabled", "false")
                  .set("management.tracing.export.enabled", "true")
                  .set("management.tracing.sampling.probability", "1.0")
                  .set(
                      "management.opentelemetry.tracing.export.otlp.endpoint",
                      "http://127.0.0.1:" + otlp + "/v1/traces")
                  .set("management.opentelemetry.tracing.export.schedule-delay", "100ms")));
    }
  }

  @AfterAll
  static void stop() throws InterruptedException {
    replicas.forEach(ManualCache::close);
    if (jaeger != null) {
      jaeger.destroy();
      jaeger.waitFor();
    }
  }

  @Test
  void aColdPullThroughTwoReplicasIsOneTracePerRequestAcrossBoth() throws Exception {
    Image image = upstream.pusher().push(imageWithLayersOwnedByBoth());
    replicas
        .get(0)
        .client()
        .pullAndVerify(image); // digests of the manifest and every blob verified

    String remote =
        image.layers().stream()
            .map(TestImages.Blob::digest)
            .filter(d -> owner(d).equals(members.get(1)))
            .findFirst()
            .orElseThrow();
    String local =
        image.layers().stream()
            .map(TestImages.Blob::digest)
            .filter(d -> owner(d).equals(members.get(0)))
            .findFirst()
            .orElseThrow();

    // A blob that replica B owns: A's request, A's peer hop, and B's side of it in the same trace.
    Trace viaOwner = awaitTrace("pull blob", remote, "storage commit", SERVICE_B);
    Span pull = viaOwner.root("pull blob", SERVICE_A);
    assertThat(pull.tag("registry.reference")).isEqualTo(remote);
    assertThat(pull.tag("registry.repository")).isEqualTo(image.repository());
    assertThat(pull.tag("http.request.method")).isEqualTo("GET");
    assertThat(pull.tag("http.response.status_code")).isEqualTo("200");
    assertThat(pull.tag("registry.cache.result")).isEqualTo("miss");
    Span hop = viaOwner.child(pull, "peer fetch", SERVICE_A);
    assertThat(hop.tag("registry.peer.owner")).isEqualTo(members.get(1).id());
    Span served = viaOwner.child(hop, "peer serve blob", SERVICE_B);
    assertThat(served.tag("http.response.status_code")).isEqualTo("200");
    assertThat(viaOwner.child(served, "upstream blob", SERVICE_B).tag("registry.upstream"))
        .isEqualTo("local");
    assertThat(viaOwner.child(served, "blob body", SERVICE_B).tag("registry.digest"))
        .isEqualTo(remote);
    assertThat(viaOwner.child(served, "storage commit", SERVICE_B).tag("registry.digest"))
        .isEqualTo(remote);
    assertThat(viaOwner.child(pull, "blob body", SERVICE_A).tag("registry.size"))
        .isEqualTo(
            Long.toString(
                image.layers().stream()
                    .filter(b -> b.digest().equals(remote))
                    .findFirst()
                    .orElseThrow()
                    .bytes()
                    .length));
    assertThat(viaOwner.child(pull, "storage commit", SERVICE_A).tag("registry.digest"))
        .isEqualTo(remote);
    assertThat(viaOwner.spans)
        .as("no span of the trace names a credential")
        .allSatisfy(
            s ->
                assertThat(s.tags.toString())
                    .doesNotContain(TOKEN)
                    .doesNotContainIgnoringCase("authorization"));
    // The trace as Jaeger gives it, for docs/tracing/trace-svg.py (the README's picture).
    HttpResponse<String> raw = get(query + "/api/traces/" + viaOwner.id());
    assertThat(raw.statusCode()).isEqualTo(200);
    Files.createDirectories(Path.of("target/tracing-it"));
    Files.writeString(Path.of("target/tracing-it/cold-pull-trace.json"), raw.body());

    // A blob that replica A owns: straight to the upstream from A.
    Trace direct = awaitTrace("pull blob", local, "storage commit", SERVICE_A);
    Span own = direct.root("pull blob", SERVICE_A);
    assertThat(direct.child(own, "upstream blob", SERVICE_A).tag("registry.upstream"))
        .isEqualTo("local");
    assertThat(direct.child(own, "storage commit", SERVICE_A).tag("registry.digest"))
        .isEqualTo(local);
    assertThat(direct.spans).noneMatch(s -> s.service.equals(SERVICE_B));

    // The manifest: fetched from the upstream by its owner, whichever replica that is.
    Trace manifest = awaitTrace("pull manifest", image.tag(), "upstream manifest", null);
    assertThat(manifest.root("pull manifest", SERVICE_A).tag("registry.kind"))
        .isEqualTo("manifest");
    assertThat(manifest.spans).anyMatch(s -> s.name.equals("upstream manifest"));
  }

  // --- Jaeger's query API ---

  /** One span as Jaeger's query API gives it. */
  record Span(String id, String parent, String name, String service, Map<String, String> tags) {
    String tag(String key) {
      return tags.get(key);
    }
  }

  record Trace(String id, List<Span> spans) {
    Span root(String name, String service) {
      return spans.stream()
          .filter(s -> s.parent == null && s.name.equals(name))
          .findFirst()
          .map(
              s -> {
                assertThat(s.service).as("service of %s", name).isEqualTo(service);
                return s;
              })
          .orElseThrow(() -> new AssertionError("no root span " + name + " in " + describe()));
    }

    Span child(Span parent, String name, String service) {
      return spans.stream()
          .filter(
              s -> parent.id.equals(s.parent) && s.name.equals(name) && s.service.equals(service))
          .findFirst()
          .orElseThrow(
              () ->
                  new AssertionError(
                      "no span "
                          + name
                          + " of "
                          + service
                          + " under "
                          + parent.name
                          + " in "
                          + describe()));
    }

    String describe() {
      return spans.stream()
          .map(s -> s.service + ":" + s.name + "(" + s.id + "<-" + s.parent + ")")
          .toList()
          .toString();
    }
  }

  /**
   * The trace whose root span {@code root} has {@code registry.reference} {@code reference}, once
   * it holds a span {@code last} (of {@code service}, when given): replicas export in batches, so
   * the trace is read again until its last expected span arrived, or 60 s went by.
   */
  static Trace awaitTrace(String root, String reference, String last, String service) {
    Trace[] found = {null};
    await("a trace of " + root + " " + reference + " with " + last + " in jaeger")
        .atMost(Duration.ofSeconds(60))
        .pollInterval(Duration.ofMillis(250))
        .until(
            () -> {
              found[0] =
                  traces(SERVICE_A).stream()
                      .filter(
                          t ->
                              t.spans.stream()
                                  .anyMatch(
                                      s ->
                                          s.parent == null
                                              && s.name.equals(root)
                                              && reference.equals(s.tag("registry.reference"))))
                      .findFirst()
                      .orElse(null);
              return found[0] != null
                  && found[0].spans.stream()
                      .anyMatch(
                          s ->
                              s.name.equals(last)
                                  && (service == null || s.service.equals(service)));
            });
    return found[0];
  }

  static List<Trace> traces(String service) throws IOException, InterruptedException {
    HttpResponse<String> response =
        get(
            query
                + "/api/traces?limit=200&lookback=1h&service="
                + URLEncoder.encode(service, StandardCharsets.UTF_8));
    assertThat(response.statusCode()).as(response.body()).isEqualTo(200);
    List<Trace> traces = new ArrayList<>();
    for (JsonNode trace : json.readTree(response.body()).path("data")) {
      Map<String, String> services = new HashMap<>();
      trace
          .path("processes")
          .properties()
          .forEach(p -> services.put(p.getKey(), p.getValue().path("serviceName").asText()));
      List<Span> spans = new ArrayList<>();
      for (JsonNode span : trace.path("spans")) {
        String parent = null;
        for (JsonNode reference : span.path("references")) {
          if ("CHILD_OF".equals(reference.path("refType").asText())) {
            parent = reference.path("spanID").asText();
          }
        }
        Map<String, String> tags = new HashMap<>();
        for (JsonNode tag : span.path("tags")) {
          tags.put(tag.path("key").asText(), tag.path("value").asText());
        }
        spans.add(
            new Span(
                span.path("spanID").asText(),
                parent,
                span.path("operationName").asText(),
                services.get(span.path("processID").asText()),
                tags));
      }
      traces.add(new Trace(trace.path("traceID").asText(), spans));
    }
    return traces;
  }

  static HttpResponse<String> get(String url) throws IOException, InterruptedException {
    return http.send(
        HttpRequest.newBuilder(URI.create(url)).timeout(Duration.ofSeconds(10)).build(),
        HttpResponse.BodyHandlers.ofString());
  }

  // --- the image ---

  static Member owner(String digest) {
    return RendezvousHashing.owner(digest, members).orElseThrow();
  }

  /** An image with at least one layer owned by each replica. */
  static Image imageWithLayersOwnedByBoth() {
    String repository = TestImages.uniqueRepository("tracing");
    List<byte[]> layers = new ArrayList<>();
    Map<Member, Integer> owned = new HashMap<>();
    for (long seed = 0; owned.size() < members.size(); seed++) {
      byte[] layer =
          TestImages.randomBytes(
              128 * 1024 + (int) (seed * 4099), repository.hashCode() * 31L + seed);
      layers.add(layer);
      owned.merge(owner(Sha256.digest(layer)), 1, Integer::sum);
    }
    return TestImages.withLayers(repository, "v1", layers.toArray(byte[][]::new));
  }
}
