package io.registrycache.upstream;

import static io.registrycache.testsupport.ScriptedHttp.base;
import static io.registrycache.testsupport.ScriptedHttp.respond;
import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import com.sun.net.httpserver.HttpServer;
import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import io.registrycache.oci.Digest;
import io.registrycache.oci.RepositoryName;
import io.registrycache.testsupport.ScriptedHttp;
import io.registrycache.testsupport.TestUpstreams;
import java.net.URI;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CopyOnWriteArrayList;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

/**
 * The upstream side of the referrers API against a scripted loopback upstream that pages (which
 * go-containerregistry's registry never does): the {@code Link} is resolved to the next page, a 404
 * tells "no referrers API", and a next page on another host is refused.
 */
class UpstreamReferrersTest {

  private static final Duration WAIT = Duration.ofSeconds(20);
  private static final RepositoryName NAME = RepositoryName.parse("team/app");
  private static final Digest SUBJECT = Digest.sha256("subject".getBytes(StandardCharsets.UTF_8));

  private final List<AutoCloseable> closeables = new ArrayList<>();
  private ReactorNettyUpstreamClient client;

  @BeforeEach
  void setUp() {
    client = new ReactorNettyUpstreamClient(null, new SimpleMeterRegistry());
  }

  @AfterEach
  void tearDown() throws Exception {
    client.destroy();
    for (AutoCloseable c : closeables) {
      c.close();
    }
  }

  @Test
  void followsTheUpstreamLinkToTheLastPage() {
    List<String> asked = new CopyOnWriteArrayList<>();
    HttpServer server = ScriptedHttp.server(closeables);
    server.createContext(
        "/v2/",
        ex -> {
          asked.add(ex.getRequestURI().toString());
          boolean second = "page=2".equals(ex.getRequestURI().getRawQuery());
          Map<String, String> headers =
              second
                  ? Map.of("Content-Type", "application/vnd.oci.image.index.v1+json")
                  : Map.of(
                      "Content-Type",
                      "application/vnd.oci.image.index.v1+json",
                      "Link",
                      "</v2/team/app/referrers/" + SUBJECT + "?page=2>; rel=\"next\"");
          respond(
              ex,
              200,
              headers,
              ("{\"schemaVersion\":2,\"manifests\":[{\"digest\":\""
                      + (second ? "b" : "a")
                      + "\"}]}")
                  .getBytes(StandardCharsets.UTF_8));
        });
    Upstream upstream = TestUpstreams.upstream("api", base(server), s -> {});

    UpstreamReferrers first = client.listReferrers(upstream, NAME, SUBJECT, null).block(WAIT);
    assertThat(first.next())
        .isEqualTo(URI.create(base(server) + "/v2/team/app/referrers/" + SUBJECT + "?page=2"));
    UpstreamReferrers last =
        client.listReferrers(upstream, NAME, SUBJECT, first.next()).block(WAIT);
    assertThat(last.next()).isNull();
    assertThat(new String(last.body(), StandardCharsets.UTF_8)).contains("\"b\"");
    assertThat(asked)
        .containsExactly(
            "/v2/team/app/referrers/" + SUBJECT, "/v2/team/app/referrers/" + SUBJECT + "?page=2");
  }

  @Test
  void notFoundMeansNoReferrersApiAndAForeignNextPageIsRefused() {
    HttpServer server = ScriptedHttp.server(closeables);
    server.createContext(
        "/v2/",
        ex -> respond(ex, 404, Map.of(), "404 page not found".getBytes(StandardCharsets.UTF_8)));
    Upstream upstream = TestUpstreams.upstream("old", base(server), s -> {});

    assertThatThrownBy(() -> client.listReferrers(upstream, NAME, SUBJECT, null).block(WAIT))
        .isInstanceOfSatisfying(UpstreamException.class, e -> assertThat(e.isNotFound()).isTrue());
    assertThatThrownBy(
            () ->
                client
                    .listReferrers(upstream, NAME, SUBJECT, URI.create("http://192.0.2.1/v2/x"))
                    .block(WAIT))
        .isInstanceOfSatisfying(
            UpstreamException.class, e -> assertThat(e.getMessage()).contains("another host"));
  }
}
