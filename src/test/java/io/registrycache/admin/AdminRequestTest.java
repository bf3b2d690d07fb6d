package io.registrycache.admin;

import static org.assertj.core.api.Assertions.assertThat;

import io.registrycache.RegistryCacheApplication;
import io.registrycache.testsupport.CacheProperties;
import io.registrycache.testsupport.TestFiles;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.file.Path;
import org.junit.jupiter.api.Test;
import org.springframework.boot.test.context.SpringBootTest;
import org.springframework.boot.test.web.server.LocalManagementPort;
import org.springframework.test.context.DynamicPropertyRegistry;
import org.springframework.test.context.DynamicPropertySource;

/**
 * The admin API over HTTP says what is wrong with a request: a body that is not JSON, not a JSON
 * object of strings, numbers and booleans, or a value of the wrong kind gets 400 with {@code
 * {"error": "..."}} naming the problem; an eviction from an upstream that is neither configured nor
 * cached gets 404, not 200 with nothing evicted.
 */
@SpringBootTest(
    classes = RegistryCacheApplication.class,
    webEnvironment = SpringBootTest.WebEnvironment.RANDOM_PORT)
class AdminRequestTest {

  static final Path storage = TestFiles.tempDirectory("registry-cache-admin-request-");

  @LocalManagementPort int managementPort;

  @DynamicPropertySource
  static void properties(DynamicPropertyRegistry registry) {
    CacheProperties.cache(storage).addTo(registry);
  }

  private HttpResponse<String> post(String action, String json) throws Exception {
    HttpRequest request =
        HttpRequest.newBuilder(
                URI.create("http://127.0.0.1:" + managementPort + "/actuator/cache/" + action))
            .header("Content-Type", "application/json")
            .POST(HttpRequest.BodyPublishers.ofString(json))
            .build();
    return HttpClient.newHttpClient().send(request, HttpResponse.BodyHandlers.ofString());
  }

  @Test
  void malformedJsonIsA400SayingWhereAndWhat() throws Exception {
    HttpResponse<String> response = post("evict", "{\"upstream\":\"local\",");

    assertThat(response.statusCode()).isEqualTo(400);
    assertThat(response.headers().firstValue("Content-Type"))
        .hasValueSatisfying(t -> assertThat(t).startsWith("application/json"));
    assertThat(response.body())
        .startsWith("{\"error\":\"the request body is not valid JSON: Unexpected end-of-input")
        .endsWith("(line 1, column 21)\"}");
  }

  @Test
  void jsonThatIsNotAnObjectOfScalarsIsA400SayingSo() throws Exception {
    for (String body : new String[] {"[\"a\"]", "{\"repository\":{\"a\":1}}"}) {
      HttpResponse<String> response = post("evict", body);

      assertThat(response.statusCode()).as(body).isEqualTo(400);
      assertThat(response.body())
          .as(body)
          .startsWith(
              "{\"error\":\"the request body must be a JSON object whose values are strings, numbers or booleans")
          .doesNotContain("java.");
    }
  }

  @Test
  void valuesOfTheWrongKindAreA400NamingTheField() throws Exception {
    HttpResponse<String> keep = post("prune", "{\"keep\":\"three\",\"dryRun\":true}");
    assertThat(keep.statusCode()).isEqualTo(400);
    assertThat(keep.body()).isEqualTo("{\"error\":\"keep must be a whole number, not 'three'\"}");

    HttpResponse<String> dryRun = post("prune", "{\"keep\":3,\"dryRun\":\"maybe\"}");
    assertThat(dryRun.statusCode()).isEqualTo(400);
    assertThat(dryRun.body())
        .isEqualTo("{\"error\":\"dryRun must be true or false, not 'maybe'\"}");

    HttpResponse<String> fine = post("prune", "{\"keep\":3,\"dryRun\":true}");
    assertThat(fine.statusCode()).as(fine.body()).isEqualTo(200);
  }

  @Test
  void evictingFromAnUnknownUpstreamIsA404() throws Exception {
    HttpResponse<String> unknown =
        post(
            "evict", "{\"upstream\":\"lcoal\",\"repository\":\"library/alpine\",\"tag\":\"3.20\"}");

    assertThat(unknown.statusCode()).isEqualTo(404);
    assertThat(unknown.body())
        .isEqualTo(
            "{\"error\":\"unknown upstream 'lcoal': neither configured nor the upstream"
                + " of any cached tag; upstream keys: local\"}");

    HttpResponse<String> known =
        post(
            "evict", "{\"upstream\":\"local\",\"repository\":\"library/alpine\",\"tag\":\"3.20\"}");
    assertThat(known.statusCode()).as(known.body()).isEqualTo(200);
  }
}
