package io.registrycache.api;

import io.registrycache.oci.OciErrorCode;
import io.registrycache.oci.OciException;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import org.springframework.http.HttpHeaders;
import org.springframework.http.HttpMethod;
import org.springframework.http.MediaType;
import org.springframework.web.reactive.function.server.ServerRequest;
import org.springframework.web.reactive.function.server.ServerResponse;
import reactor.core.publisher.Mono;

/**
 * Turns failures into OCI error responses: status plus {@code
 * {"errors":[{"code":...,"message":...,"detail":...}]}} (OCI Distribution Spec v1.1, "Error
 * Codes"). HEAD responses carry the status and headers only.
 */
final class OciErrors {

  private static final Logger log = LoggerFactory.getLogger(OciErrors.class);

  private OciErrors() {}

  /** The response for {@code error}, logged: 4xx at INFO, 5xx at WARN, unexpected ones at ERROR. */
  static Mono<ServerResponse> toResponse(ServerRequest request, Throwable error) {
    OciException oci;
    if (error instanceof OciException e) {
      oci = e;
    } else {
      log.error("{} {} failed unexpectedly", request.method(), request.path(), error);
      oci = new OciException(OciErrorCode.UNKNOWN, "internal error: " + error.getClass().getSimpleName());
    }
    if (oci.status().is5xxServerError()) {
      log.warn("{} {} -> {} {}: {}", request.method(), request.path(), oci.status().value(), oci.code(), oci.getMessage());
    } else if (log.isInfoEnabled()) {
      log.info("{} {} -> {} {}: {}", request.method(), request.path(), oci.status().value(), oci.code(), oci.getMessage());
    }
    ServerResponse.BodyBuilder builder = ServerResponse.status(oci.status());
    oci.retryAfter().ifPresent(d -> builder.header(HttpHeaders.RETRY_AFTER, Long.toString(Math.max(1, d.toSeconds()))));
    if (oci.code() == OciErrorCode.UNSUPPORTED) {
      builder.header(HttpHeaders.ALLOW, "GET, HEAD");
    }
    if (oci.code() == OciErrorCode.UNAUTHORIZED) {
      // The cache itself does not authenticate clients; this tells them the upstream refused.
      builder.header(HttpHeaders.WWW_AUTHENTICATE, "Basic realm=\"registry-cache upstream\"");
    }
    if (HttpMethod.HEAD.equals(request.method())) {
      return builder.build();
    }
    Map<String, Object> entry = new LinkedHashMap<>();
    entry.put("code", oci.code().name());
    entry.put("message", oci.getMessage());
    if (oci.detail() != null) {
      entry.put("detail", oci.detail());
    }
    return builder.contentType(MediaType.APPLICATION_JSON).bodyValue(Map.of("errors", List.of(entry)));
  }
}
