package io.registrycache.admin;

import io.registrycache.config.AdminProperties;
import io.registrycache.config.RegistryCacheProperties;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.net.InetSocketAddress;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import org.springframework.beans.factory.annotation.Value;
import org.springframework.boot.web.server.context.WebServerInitializedEvent;
import org.springframework.context.ApplicationListener;
import org.springframework.core.Ordered;
import org.springframework.core.io.buffer.DataBuffer;
import org.springframework.http.HttpHeaders;
import org.springframework.http.HttpStatus;
import org.springframework.http.MediaType;
import org.springframework.http.server.reactive.ServerHttpRequest;
import org.springframework.http.server.reactive.ServerHttpResponse;
import org.springframework.stereotype.Component;
import org.springframework.web.server.ServerWebExchange;
import org.springframework.web.server.WebFilter;
import org.springframework.web.server.WebFilterChain;
import reactor.core.publisher.Mono;

/**
 * Guards the management port's actuator endpoints (the admin API's prune, evict, janitor and
 * preload among them). Open to anyone: {@code health} and its probes ({@code health/liveness},
 * {@code health/readiness}), and {@code prometheus} unless {@code
 * registry-cache.admin.public-prometheus=false}. Everything else below the actuator base path:
 *
 * <ul>
 *   <li>with a token ({@code registry-cache.admin.token} or {@code token-file}): {@code
 *       Authorization: Bearer <token>} required, else 401 with {@code WWW-Authenticate: Bearer};
 *       compared in constant time, never logged
 *   <li>without one: loopback clients only (a local {@code ./mvnw spring-boot:run}, a sidecar),
 *       403 for everyone else
 * </ul>
 *
 * Registry API paths ({@code /v2}) are never touched: pulls stay anonymous. A small filter rather
 * than Spring Security, whose web filter chain would run on every pull request of the registry
 * port as well.
 */
@Component
public class AdminAccessFilter implements WebFilter, Ordered, ApplicationListener<WebServerInitializedEvent> {

  private static final Logger log = LoggerFactory.getLogger(AdminAccessFilter.class);

  private final String basePath;
  private final boolean publicPrometheus;
  /** SHA-256 of the token, or {@code null}: equal-length values for a constant-time compare. */
  private final byte[] tokenHash;
  /** The separate management server's port once it listens; 0 while actuator shares the registry port. */
  private volatile int managementPort;

  public AdminAccessFilter(
      RegistryCacheProperties properties,
      @Value("${management.endpoints.web.base-path:/actuator}") String basePath) {
    this.basePath = basePath.endsWith("/") ? basePath.substring(0, basePath.length() - 1) : basePath;
    AdminProperties admin = properties.admin();
    this.publicPrometheus = admin.publicPrometheus();
    String token = admin.token() == null ? "" : admin.token().strip();
    if (admin.tokenFile() != null) {
      try {
        token = Files.readString(admin.tokenFile(), StandardCharsets.UTF_8).strip();
      } catch (IOException e) {
        throw new UncheckedIOException("cannot read registry-cache.admin.token-file " + admin.tokenFile(), e);
      }
      if (token.isEmpty()) {
        throw new IllegalStateException("registry-cache.admin.token-file " + admin.tokenFile() + " is empty");
      }
    }
    this.tokenHash = token.isEmpty() ? null : sha256(token);
    log.info(tokenHash == null
        ? "Management endpoints other than health{}: loopback clients only (no registry-cache.admin.token set)"
        : "Management endpoints other than health{}: bearer token required",
        publicPrometheus ? " and prometheus" : "");
  }

  @Override
  public void onApplicationEvent(WebServerInitializedEvent event) {
    if ("management".equals(event.getApplicationContext().getServerNamespace())) {
      managementPort = event.getWebServer().getPort();
    }
  }

  @Override
  public int getOrder() {
    return Ordered.HIGHEST_PRECEDENCE + 2;
  }

  @Override
  public Mono<Void> filter(ServerWebExchange exchange, WebFilterChain chain) {
    ServerHttpRequest request = exchange.getRequest();
    String path = request.getPath().pathWithinApplication().value();
    // This filter runs in the registry port's context as well: there /actuator is not served.
    boolean otherPort = managementPort != 0
        && (request.getLocalAddress() == null || request.getLocalAddress().getPort() != managementPort);
    if (otherPort || !isProtected(path)) {
      return chain.filter(exchange);
    }
    if (tokenHash == null) {
      return isLoopback(request.getRemoteAddress())
          ? chain.filter(exchange)
          : refuse(exchange, HttpStatus.FORBIDDEN,
              "management endpoints answer loopback clients only; set registry-cache.admin.token-file "
                  + "(or REGISTRY_CACHE_ADMIN_TOKEN) to allow others with a bearer token");
    }
    String authorization = request.getHeaders().getFirst(HttpHeaders.AUTHORIZATION);
    if (authorization != null && authorization.regionMatches(true, 0, "Bearer ", 0, 7)
        && MessageDigest.isEqual(tokenHash, sha256(authorization.substring(7).strip()))) {
      return chain.filter(exchange);
    }
    exchange.getResponse().getHeaders().set(HttpHeaders.WWW_AUTHENTICATE, "Bearer realm=\"registry-cache management\"");
    return refuse(exchange, HttpStatus.UNAUTHORIZED, "a valid 'Authorization: Bearer <token>' is required");
  }

  /** Below the actuator base path, and neither health nor (when public) prometheus. */
  boolean isProtected(String path) {
    if (!(path.equals(basePath) || path.startsWith(basePath + "/"))) {
      return false;
    }
    String endpoint = path.substring(basePath.length());
    if (endpoint.equals("/health") || endpoint.startsWith("/health/")) {
      return false;
    }
    return !(publicPrometheus && endpoint.equals("/prometheus"));
  }

  private static boolean isLoopback(InetSocketAddress remote) {
    return remote != null && remote.getAddress() != null && remote.getAddress().isLoopbackAddress();
  }

  private static Mono<Void> refuse(ServerWebExchange exchange, HttpStatus status, String message) {
    ServerHttpResponse response = exchange.getResponse();
    response.setStatusCode(status);
    response.getHeaders().setContentType(MediaType.APPLICATION_JSON);
    DataBuffer body = response.bufferFactory().wrap(io.registrycache.oci.Json.MAPPER.writeValueAsBytes(java.util.Map.of("error", message)));
    return response.writeWith(Mono.just(body));
  }

  private static byte[] sha256(String value) {
    try {
      return MessageDigest.getInstance("SHA-256").digest(value.getBytes(StandardCharsets.UTF_8));
    } catch (NoSuchAlgorithmException e) {
      throw new IllegalStateException(e);
    }
  }
}
