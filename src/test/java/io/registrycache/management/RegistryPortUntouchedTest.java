package io.registrycache.management;

import static org.assertj.core.api.Assertions.assertThat;

import io.registrycache.RegistryCacheApplication;
import io.registrycache.testsupport.CacheProperties;
import io.registrycache.testsupport.RawHttp;
import io.registrycache.testsupport.TestFiles;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Set;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;
import org.springframework.beans.factory.annotation.Autowired;
import org.springframework.boot.test.context.SpringBootTest;
import org.springframework.boot.test.context.TestConfiguration;
import org.springframework.boot.test.system.CapturedOutput;
import org.springframework.boot.test.system.OutputCaptureExtension;
import org.springframework.boot.test.web.server.LocalManagementPort;
import org.springframework.boot.test.web.server.LocalServerPort;
import org.springframework.boot.web.server.context.WebServerApplicationContext;
import org.springframework.boot.web.server.context.WebServerInitializedEvent;
import org.springframework.context.ApplicationContext;
import org.springframework.context.ApplicationListener;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Import;
import org.springframework.http.server.reactive.HttpHandler;
import org.springframework.security.core.userdetails.ReactiveUserDetailsService;
import org.springframework.security.web.server.WebFilterChainProxy;
import org.springframework.test.context.DynamicPropertyRegistry;
import org.springframework.test.context.DynamicPropertySource;
import org.springframework.web.server.WebFilter;
import org.springframework.web.server.WebHandler;
import org.springframework.web.server.handler.FilteringWebHandler;
import org.springframework.web.server.handler.WebHandlerDecorator;

/**
 * Spring Security is on the management port only: the registry port's WebFlux handler runs no
 * Spring Security filter, its {@code /v2} answers carry none of Spring Security's headers, and its
 * {@code ;} and {@code %2F} paths are answered by the registry API (an OCI error body), not by the
 * management port's firewall; no user with a generated password exists. With a token set, so that
 * the management port's bearer rules are in force at the same time.
 */
@SpringBootTest(
    classes = RegistryCacheApplication.class,
    webEnvironment = SpringBootTest.WebEnvironment.RANDOM_PORT)
@ExtendWith(OutputCaptureExtension.class)
@Import(RegistryPortUntouchedTest.ManagementContextCapture.class)
class RegistryPortUntouchedTest {

  static final Path storage = TestFiles.tempDirectory("registry-cache-registry-port-untouched-");

  /** What Spring Security's default header writers add. */
  private static final Set<String> SECURITY_HEADERS =
      Set.of(
          "cache-control",
          "pragma",
          "expires",
          "x-frame-options",
          "x-content-type-options",
          "x-xss-protection",
          "strict-transport-security",
          "referrer-policy",
          "cross-origin-opener-policy",
          "cross-origin-embedder-policy",
          "cross-origin-resource-policy",
          "www-authenticate");

  @LocalServerPort int port;
  @LocalManagementPort int managementPort;
  @Autowired ApplicationContext context;

  @DynamicPropertySource
  static void properties(DynamicPropertyRegistry registry) {
    CacheProperties.cache(storage)
        .set("registry-cache.admin.token", "registry-port-untouched-1a2b")
        .addTo(registry);
  }

  /** The web filters of the WebFlux handler that {@code context}'s server runs. */
  private static List<WebFilter> filtersOf(ApplicationContext context) {
    WebHandler handler = (WebHandler) context.getBean(HttpHandler.class);
    List<WebFilter> filters = new ArrayList<>();
    while (handler instanceof WebHandlerDecorator decorator) {
      if (decorator instanceof FilteringWebHandler filtering) {
        filters.addAll(filtering.getFilters());
      }
      handler = decorator.getDelegate();
    }
    return filters;
  }

  private static boolean fromSpringSecurity(WebFilter filter) {
    return filter.getClass().getName().startsWith("org.springframework.security.");
  }

  @Test
  void theRegistryPortsWebFluxHandlerRunsNoSpringSecurityFilter() {
    assertThat(WebServerApplicationContext.getServerNamespace(context)).isNull();
    assertThat(filtersOf(context))
        .isNotEmpty()
        .noneMatch(RegistryPortUntouchedTest::fromSpringSecurity);
    assertThat(context.getBeanNamesForType(WebFilterChainProxy.class)).isEmpty();
    assertThat(context.getBeanNamesForType(ReactiveUserDetailsService.class)).isEmpty();
    // The management server's context, a child of this one, does run it: the check above can fail.
    ApplicationContext management = managementContext();
    assertThat(filtersOf(management)).anyMatch(f -> f instanceof WebFilterChainProxy);
  }

  /** Keeps the management server's context, a child of the main one, when its server starts. */
  @TestConfiguration(proxyBeanMethods = false)
  static class ManagementContextCapture {
    static volatile ApplicationContext management;

    @Bean
    ApplicationListener<WebServerInitializedEvent> managementContextCapture() {
      return event -> {
        if ("management".equals(event.getApplicationContext().getServerNamespace())) {
          management = event.getApplicationContext();
        }
      };
    }
  }

  private static ApplicationContext managementContext() {
    assertThat(ManagementContextCapture.management)
        .as("the management server's context")
        .isNotNull();
    return ManagementContextCapture.management;
  }

  @Test
  void v2AnswersCarryNoSpringSecurityHeader(CapturedOutput output) throws Exception {
    for (String target :
        new String[] {"/v2/", "/v2", "/v2/token", "/v2/_catalog", "/v2/app/tags/list?n=%zz"}) {
      RawHttp.Response r = RawHttp.get(port, target);
      assertThat(r.headers().keySet())
          .as(target + " -> " + r)
          .doesNotContainAnyElementsOf(SECURITY_HEADERS);
      assertThat(r.header("Docker-Distribution-API-Version"))
          .as(target + " -> " + r)
          .isEqualTo("registry/2.0");
    }
    assertThat(RawHttp.get(port, "/v2/").status()).isEqualTo(200);
    assertThat(output.getAll()).doesNotContain("generated security password");
  }

  @Test
  void semicolonAndEncodedSlashPathsAreTheRegistryApisToAnswer() throws Exception {
    for (String target :
        new String[] {
          "/v2/;x=y",
          "/v2/app;x=y/tags/list?n=%zz",
          "/v2/a%2Fb/referrers/sha256:zz",
          "/v2/a%2fb/tags/list?n=%zz",
          "/v2/app/referrers/sha256:zz;x=y",
          "/v2/app//referrers/sha256:zz",
          "/v2/app/./referrers/sha256:zz",
          "/v2/app/%2e%2e/referrers/sha256:zz"
        }) {
      RawHttp.Response r = RawHttp.get(port, target);
      assertThat(r.status()).as(target + " -> " + r).isBetween(200, 499);
      assertThat(r.bodyText())
          .as(target + " -> " + r)
          .doesNotContain("request refused")
          .startsWith("{\"errors\":[");
      assertThat(r.headers().keySet())
          .as(target + " -> " + r)
          .doesNotContainAnyElementsOf(SECURITY_HEADERS);
    }
  }
}
