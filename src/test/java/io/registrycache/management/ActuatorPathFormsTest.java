package io.registrycache.management;

import static org.assertj.core.api.Assertions.assertThat;

import io.registrycache.RegistryCacheApplication;
import io.registrycache.testsupport.CacheProperties;
import io.registrycache.testsupport.RawHttp;
import io.registrycache.testsupport.TestFiles;
import java.net.URI;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Collection;
import java.util.LinkedHashMap;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Optional;
import java.util.Set;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import java.util.stream.Stream;
import org.assertj.core.api.SoftAssertions;
import org.junit.jupiter.api.DynamicTest;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestFactory;
import org.springframework.boot.test.context.SpringBootTest;
import org.springframework.boot.test.web.server.LocalManagementPort;
import org.springframework.context.annotation.Import;
import org.springframework.test.context.DynamicPropertyRegistry;
import org.springframework.test.context.DynamicPropertySource;
import tools.jackson.databind.JsonNode;
import tools.jackson.databind.json.JsonMapper;

/**
 * Every actuator endpoint the running service lists ({@code /actuator}'s links, read with the
 * token), in every way of writing its path: a percent-encoded letter (upper and lower hex) in any
 * segment, a {@code ;} path parameter after any segment, doubled slashes, dot segments (after
 * {@code health/} too), a trailing slash, changed case, an encoded slash. Asked without the token
 * (none, or a wrong one) and from an address that does not look like loopback ({@code
 * X-Forwarded-For}), by GET and by POST, each must: answer no 5xx; and reach the handler of no
 * endpoint but a public one ({@code health}, {@code prometheus}), by the pattern WebFlux matched
 * ({@link HandlerProbe}; WebFlux's static-resource fallback {@code /**}, which has nothing to
 * serve, is no endpoint); a path of a protected endpoint is refused (400 from the firewall or 401
 * with the Bearer challenge) and its answer holds nothing of the endpoint's own.
 */
@SpringBootTest(
    classes = RegistryCacheApplication.class,
    webEnvironment = SpringBootTest.WebEnvironment.RANDOM_PORT)
@Import(HandlerProbe.class)
class ActuatorPathFormsTest {

  static final String TOKEN = "walk-every-form-5d1c8a";
  static final Path storage = TestFiles.tempDirectory("registry-cache-actuator-forms-");
  private static final JsonMapper JSON = JsonMapper.builder().build();

  /** Link names open to anyone: health (and its probes) and prometheus. */
  private static final Set<String> PUBLIC_LINKS = Set.of("health", "health-path", "prometheus");

  private static final Pattern TEMPLATE_VARIABLE = Pattern.compile("\\{\\*?([^}]+)}");

  /** Values for template variables, so the endpoint answers with what it holds rather than 404. */
  private static final Map<String, String> SAMPLE_VALUES =
      Map.of(
          "what",
          "images",
          "requiredMetricName",
          "jvm.threads.live",
          "path",
          "liveness",
          "id",
          "1",
          "action",
          "janitor");

  @LocalManagementPort int managementPort;

  @DynamicPropertySource
  static void properties(DynamicPropertyRegistry registry) {
    CacheProperties.cache(storage).set("registry-cache.admin.token", TOKEN).addTo(registry);
  }

  /**
   * One link of {@code /actuator}: its name, its href's path as a template, and that path filled
   * in.
   */
  record Endpoint(String name, String template, String path) {
    boolean isPublic() {
      return PUBLIC_LINKS.contains(name);
    }
  }

  private List<Endpoint> endpoints() throws Exception {
    RawHttp.Response links =
        RawHttp.get(managementPort, "/actuator", "Authorization: Bearer " + TOKEN);
    assertThat(links.status()).as(links.toString()).isEqualTo(200);
    List<Endpoint> endpoints = new ArrayList<>();
    endpoints.add(new Endpoint("links", "/actuator", "/actuator"));
    JsonNode node = JSON.readTree(links.bodyText()).path("_links");
    for (Map.Entry<String, JsonNode> link : node.properties()) {
      if (link.getKey().equals("self")) {
        continue;
      }
      String template =
          URI.create(
                  link.getValue().path("href").asString().replace("{", "%7B").replace("}", "%7D"))
              .getPath();
      Matcher m = TEMPLATE_VARIABLE.matcher(template);
      StringBuilder path = new StringBuilder();
      while (m.find()) {
        m.appendReplacement(path, SAMPLE_VALUES.getOrDefault(m.group(1), "x"));
      }
      m.appendTail(path);
      endpoints.add(new Endpoint(link.getKey(), template, path.toString()));
    }
    return endpoints;
  }

  @Test
  void theLinksListTheAdminApiAndTheProbeSeesItsHandler() throws Exception {
    List<Endpoint> endpoints = endpoints();
    assertThat(endpoints)
        .extracting(Endpoint::name)
        .contains(
            "health",
            "health-path",
            "prometheus",
            "metrics",
            "info",
            "cache",
            "cache-what",
            "cache-what-id");
    // The oracle works: with the token the request reaches the handler and the probe names it.
    String id = HandlerProbe.nextId();
    RawHttp.Response images =
        RawHttp.get(
            managementPort,
            "/actuator/cache/images",
            "Authorization: Bearer " + TOKEN,
            HandlerProbe.HEADER + ": " + id);
    assertThat(images.status()).as(images.toString()).isEqualTo(200);
    assertThat(HandlerProbe.matchedPattern(id)).contains("/actuator/cache/{what}");
  }

  /** Every way of writing {@code path} that this test tries, each once. */
  static Set<String> forms(String path) {
    List<String> segments = List.of(path.substring(1).split("/", -1));
    Set<String> forms = new LinkedHashSet<>();
    forms.add(path);
    for (int i = 0; i < segments.size(); i++) {
      String segment = segments.get(i);
      // percent-encoded letters: the whole segment (upper and lower hex), and each letter alone
      forms.add(join(segments, i, encode(segment, true)));
      forms.add(join(segments, i, encode(segment, false)));
      for (int c = 0; c < segment.length(); c++) {
        String one = encode(segment.substring(c, c + 1), (c % 2) == 0);
        forms.add(join(segments, i, segment.substring(0, c) + one + segment.substring(c + 1)));
      }
      // path parameters after the segment
      forms.add(join(segments, i, segment + ";x=y"));
      forms.add(join(segments, i, segment + ";"));
      forms.add(join(segments, i, segment + ";jsessionid=1;a=b,c"));
      // changed case
      forms.add(join(segments, i, segment.toUpperCase(Locale.ROOT)));
      if (!segment.isEmpty()) {
        forms.add(
            join(segments, i, Character.toUpperCase(segment.charAt(0)) + segment.substring(1)));
      }
      // dot segments that lead back to the same path, doubled slashes, a backslash
      forms.add(join(segments, i, "./" + segment));
      forms.add(join(segments, i, "x/../" + segment));
      forms.add(join(segments, i, "%2e/" + segment));
      forms.add(join(segments, i, "x/%2E%2e/" + segment));
      forms.add(join(segments, i, "health/../" + segment));
      forms.add(join(segments, i, "health/..;/" + segment));
      forms.add(join(segments, i, "health/%2e%2e/" + segment));
      forms.add(join(segments, i, "/" + segment));
      forms.add(join(segments, i, "\\" + segment));
      forms.add(join(segments, i, "%5C" + segment));
      if (i > 0) {
        // the slash before the segment encoded
        String before = "/" + String.join("/", segments.subList(0, i));
        String rest = String.join("/", segments.subList(i, segments.size()));
        forms.add(before + "%2F" + rest);
        forms.add(before + "%2f" + rest);
      }
    }
    forms.add(path + "/");
    forms.add(path + "//");
    forms.add(path + "/.");
    forms.add(path + "/..");
    forms.add(path + "/%2e");
    forms.add(path + "/./");
    forms.add(path + ";x=y/");
    forms.add("//" + path.substring(1));
    forms.add(path + "?x=y;z");
    forms.add(path + "#fragment");
    forms.add("/actuator/health/.." + path.substring("/actuator".length()));
    forms.add("/actuator/health/." + path.substring("/actuator".length()));
    if (path.startsWith("/actuator/")) {
      forms.add("/actuator/health/" + path.substring("/actuator/".length()) + "/..");
    }
    return forms;
  }

  private static String join(List<String> segments, int replaced, String replacement) {
    List<String> copy = new ArrayList<>(segments);
    copy.set(replaced, replacement);
    return "/" + String.join("/", copy);
  }

  /** Each character of {@code s} as {@code %XX}, upper or lower hex digits. */
  private static String encode(String s, boolean upper) {
    StringBuilder out = new StringBuilder();
    for (byte b : s.getBytes(StandardCharsets.UTF_8)) {
      String hex = String.format("%02X", b & 0xff);
      out.append('%').append(upper ? hex : hex.toLowerCase(Locale.ROOT));
    }
    return out.toString();
  }

  @TestFactory
  Stream<DynamicTest> everyEndpointInEveryPathFormGivesAnonymousClientsNothingProtectedAndNo500()
      throws Exception {
    List<Endpoint> endpoints = endpoints();
    Set<String> protectedPatterns = new LinkedHashSet<>();
    Map<String, String> protectedBodies = new LinkedHashMap<>();
    for (Endpoint e : endpoints) {
      if (!e.isPublic()) {
        protectedPatterns.add(e.template());
        RawHttp.Response withToken =
            RawHttp.get(managementPort, e.path(), "Authorization: Bearer " + TOKEN);
        if (withToken.status() == 200 && withToken.body().length > 2) {
          protectedBodies.put(e.name(), withToken.bodyText());
        }
      }
    }
    assertThat(protectedBodies).containsKeys("links", "cache", "cache-what", "metrics");
    return endpoints.stream()
        .flatMap(
            e ->
                Stream.of("GET", "POST")
                    .map(
                        method ->
                            DynamicTest.dynamicTest(
                                method + " " + e.path() + " (" + e.name() + ")",
                                () ->
                                    walk(e, method, protectedPatterns, protectedBodies.values()))));
  }

  private void walk(
      Endpoint endpoint,
      String method,
      Set<String> protectedPatterns,
      Collection<String> protectedBodies)
      throws Exception {
    SoftAssertions softly = new SoftAssertions();
    byte[] body = "POST".equals(method) ? "{}".getBytes(StandardCharsets.UTF_8) : new byte[0];
    for (String form : forms(endpoint.path())) {
      for (String authorization : new String[] {null, "Bearer not-" + TOKEN, "Basic " + TOKEN}) {
        String id = HandlerProbe.nextId();
        List<String> headers = new ArrayList<>();
        headers.add(RawHttp.host(managementPort));
        headers.add("X-Forwarded-For: 203.0.113.7");
        headers.add("Forwarded: for=203.0.113.7");
        headers.add(HandlerProbe.HEADER + ": " + id);
        if (body.length > 0) {
          headers.add("Content-Type: application/json");
          headers.add("Content-Length: " + body.length);
        }
        if (authorization != null) {
          headers.add("Authorization: " + authorization);
        }
        RawHttp.Response answer = RawHttp.send(managementPort, method, form, headers, body);
        String what =
            method
                + " "
                + form
                + (authorization == null
                    ? ""
                    : " with " + authorization.split(" ")[0] + " but not the token")
                + " -> "
                + answer;
        softly.assertThat(answer.status()).as(what).isBetween(200, 499);
        Optional<String> reached = HandlerProbe.matchedPattern(id);
        reached.ifPresent(
            pattern ->
                softly
                    .assertThat(protectedPatterns)
                    .as(what + " reached the handler of " + pattern)
                    .doesNotContain(pattern));
        if (!endpoint.isPublic()) {
          softly.assertThat(answer.status()).as(what).isIn(400, 401);
          if (answer.status() == 401) {
            softly
                .assertThat(answer.header("WWW-Authenticate"))
                .as(what)
                .startsWith("Bearer realm=\"registry-cache management\"");
          }
          for (String secret : protectedBodies) {
            softly.assertThat(answer.bodyText()).as(what).doesNotContain(secret);
          }
        }
      }
    }
    softly.assertAll();
  }
}
