package io.registrycache.api;

import static org.assertj.core.api.Assertions.assertThat;

import io.registrycache.auth.PullAccess;
import io.registrycache.auth.PullAuthentication;
import io.registrycache.auth.TokenService;
import io.registrycache.config.RegistryCacheProperties;
import io.registrycache.testsupport.TestFiles;
import io.registrycache.upstream.Upstreams;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.Map;
import java.util.Random;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;
import org.springframework.core.io.buffer.DataBuffer;
import org.springframework.core.io.buffer.DefaultDataBufferFactory;
import org.springframework.http.MediaType;
import org.springframework.http.codec.HttpMessageWriter;
import org.springframework.mock.http.server.reactive.MockServerHttpRequest;
import org.springframework.mock.web.server.MockServerWebExchange;
import org.springframework.security.crypto.bcrypt.BCryptPasswordEncoder;
import org.springframework.test.web.reactive.server.WebTestClient;
import org.springframework.web.reactive.function.server.HandlerStrategies;
import org.springframework.web.reactive.function.server.RequestPredicates;
import org.springframework.web.reactive.function.server.RouterFunctions;
import org.springframework.web.reactive.function.server.ServerRequest;
import org.springframework.web.reactive.function.server.ServerResponse;
import org.springframework.web.reactive.function.server.ServerResponse.Context;
import org.springframework.web.reactive.result.view.ViewResolver;
import reactor.core.publisher.Flux;
import tools.jackson.databind.JsonNode;
import tools.jackson.databind.json.JsonMapper;

/**
 * The token endpoint's answers to malformed and oversized requests (RFC 6749 section 5.2): 400
 * {@code invalid_request}, 413, {@code unsupported_grant_type}, {@code invalid_grant}, each with
 * the OAuth2 error and an OCI error body, never a 5xx.
 */
class TokenEndpointTest {

  static final JsonMapper JSON = JsonMapper.builder().build();
  static WebTestClient client;
  static TokenEndpoint endpoint;

  @BeforeAll
  static void endpoint() throws Exception {
    Path htpasswd =
        Files.writeString(
            TestFiles.tempDirectory("token-endpoint-").resolve("htpasswd"),
            "alice:" + new BCryptPasswordEncoder(4).encode("s3cret") + "\n");
    RegistryCacheProperties properties =
        RegistryCacheProperties.bind(
            Map.of(
                "registry-cache.auth.enabled", "true",
                "registry-cache.auth.htpasswd-file", htpasswd.toString(),
                "registry-cache.auth.token.enabled", "true",
                "registry-cache.auth.rules[0].subjects", "user:alice",
                "registry-cache.auth.rules[0].repositories", "team/**"));
    TokenService tokens = new TokenService(properties);
    PullAuthentication authentication = new PullAuthentication(properties, tokens);
    endpoint =
        new TokenEndpoint(
            tokens,
            authentication,
            new PullAccess(properties, authentication, null),
            new Upstreams(properties));
    client =
        WebTestClient.bindToRouterFunction(
                RouterFunctions.route(RequestPredicates.path("/v2/token"), endpoint::handle))
            .build();
  }

  private static WebTestClient.ResponseSpec post(String contentType, byte[] body) {
    return client
        .post()
        .uri("/v2/token")
        .header("Content-Type", contentType)
        .bodyValue(body)
        .exchange();
  }

  private static WebTestClient.ResponseSpec form(String body) {
    return post(MediaType.APPLICATION_FORM_URLENCODED_VALUE, body.getBytes(StandardCharsets.UTF_8));
  }

  /** The status, and the RFC 6749 error with its OCI code beside it. */
  private static JsonNode error(
      WebTestClient.ResponseSpec response, int status, String error, String ociCode) {
    byte[] body =
        response
            .expectStatus()
            .isEqualTo(status)
            .expectHeader()
            .valueEquals("Cache-Control", "no-store")
            .expectBody()
            .returnResult()
            .getResponseBody();
    JsonNode json = JSON.readTree(body);
    assertThat(json.path("error").asString()).isEqualTo(error);
    assertThat(json.path("error_description").asString()).isNotEmpty();
    assertThat(json.path("errors").get(0).path("code").asString()).isEqualTo(ociCode);
    return json;
  }

  @Test
  void aGoodPasswordGrantGetsAToken() {
    client
        .post()
        .uri("/v2/token")
        .contentType(MediaType.APPLICATION_FORM_URLENCODED)
        .bodyValue(
            "grant_type=password&username=alice&password=s3cret&scope=repository%3Ateam%2Fapp%3Apull")
        .exchange()
        .expectStatus()
        .isOk()
        .expectBody()
        .jsonPath("$.access_token")
        .isNotEmpty();
  }

  @ParameterizedTest
  @ValueSource(
      strings = {
        "grant_type=password&username=alice&password=%zz",
        "grant_type=password&username=alice&password=%",
        "grant_type=%E0%A4%A&username=alice&password=s3cret",
        "grant_type=password&grant_type=password&username=alice&password=s3cret",
        "grant_type=password&username=alice&username=bob&password=s3cret",
        "grant_type=password&username=alice&password=s3cret&scope=a&scope=b",
        "grant_type=password&username=alice",
        "grant_type=password&password=s3cret",
        "grant_type=&username=alice&password=s3cret",
        "username=alice&password=s3cret",
        "grant_type=password&username=alice&password=s3cret&service=another"
      })
  void malformedFormsAreInvalidRequest(String body) {
    error(form(body), 400, "invalid_request", "UNSUPPORTED");
  }

  @ParameterizedTest
  @ValueSource(
      strings = {
        "application/json",
        "text/plain",
        "application/x-www-form-urlencoded; charset=no-such-charset",
        "application/x-www-form-urlencoded; charset=\"",
        "not a media type",
        "x/"
      })
  void aBodyThatIsNotAReadableFormIsInvalidRequest(String contentType) {
    // Straight to the handler: WebTestClient itself refuses to send a Content-Type it cannot parse.
    MockServerWebExchange exchange =
        MockServerWebExchange.from(
            MockServerHttpRequest.post("/v2/token")
                .header("Content-Type", contentType)
                .body(
                    Flux.just(
                        DefaultDataBufferFactory.sharedInstance.wrap(
                            "grant_type=password&username=alice&password=s3cret"
                                .getBytes(StandardCharsets.UTF_8)))));
    ServerRequest request =
        ServerRequest.create(exchange, HandlerStrategies.withDefaults().messageReaders());
    ServerResponse response = endpoint.handle(request).block();
    assertThat(response.statusCode().value()).isEqualTo(400);
    assertThat(response.headers().getCacheControl()).isEqualTo("no-store");
    response
        .writeTo(
            exchange,
            new Context() {
              @Override
              public List<HttpMessageWriter<?>> messageWriters() {
                return HandlerStrategies.withDefaults().messageWriters();
              }

              @Override
              public List<ViewResolver> viewResolvers() {
                return List.of();
              }
            })
        .block();
    JsonNode json = JSON.readTree(exchange.getResponse().getBodyAsString().block());
    assertThat(json.path("error").asString()).isEqualTo("invalid_request");
    assertThat(json.path("errors").get(0).path("code").asString()).isEqualTo("UNSUPPORTED");
  }

  @Test
  void aFormOverTheLimitIs413WhetherItsLengthIsSaidOrNot() {
    String big =
        "grant_type=password&username=alice&password=s3cret&scope="
            + "a".repeat(TokenEndpoint.MAX_FORM_BYTES);
    error(form(big), 413, "invalid_request", "SIZE_INVALID");
    byte[] chunk = "a".repeat(4096).getBytes(StandardCharsets.UTF_8);
    WebTestClient.ResponseSpec streamed =
        client
            .post()
            .uri("/v2/token")
            .contentType(MediaType.APPLICATION_FORM_URLENCODED)
            .body(
                Flux.range(0, 64).map(i -> DefaultDataBufferFactory.sharedInstance.wrap(chunk)),
                DataBuffer.class)
            .exchange();
    error(streamed, 413, "invalid_request", "SIZE_INVALID");
  }

  @Test
  void grantsAreAnsweredAsRfc6749NamesThem() {
    error(
        form("grant_type=client_credentials&client_id=x"),
        400,
        "unsupported_grant_type",
        "UNSUPPORTED");
    error(
        form("grant_type=refresh_token&refresh_token=x"),
        400,
        "unsupported_grant_type",
        "UNSUPPORTED");
    error(
        form("grant_type=password&username=alice&password=wrong"),
        400,
        "invalid_grant",
        "UNAUTHORIZED");
    error(
        form("grant_type=password&username=nobody&password=s3cret"),
        400,
        "invalid_grant",
        "UNAUTHORIZED");
  }

  @Test
  void aMalformedQueryIsInvalidRequest() {
    error(
        client.get().uri("/v2/token?service=registry-cache&service=registry-cache").exchange(),
        400,
        "invalid_request",
        "UNSUPPORTED");
  }

  @Test
  void noBodyOfRandomBytesGetsA5xx() {
    Random random = new Random(39);
    String alphabet = "=&%+;ZzaE0F9 \u00e9\u0000\r\n";
    for (int i = 0; i < 300; i++) {
      byte[] body;
      if (i % 2 == 0) {
        body = new byte[random.nextInt(200)];
        random.nextBytes(body);
      } else {
        StringBuilder text = new StringBuilder("grant_type=password&username=alice&password=");
        for (int j = random.nextInt(40); j > 0; j--) {
          text.append(alphabet.charAt(random.nextInt(alphabet.length())));
        }
        body = text.toString().getBytes(StandardCharsets.UTF_8);
      }
      int status =
          post(MediaType.APPLICATION_FORM_URLENCODED_VALUE, body)
              .returnResult(byte[].class)
              .getStatus()
              .value();
      assertThat(status)
          .as("body %d: %s", i, new String(body, StandardCharsets.ISO_8859_1))
          .isIn(200, 400, 413);
    }
  }
}
