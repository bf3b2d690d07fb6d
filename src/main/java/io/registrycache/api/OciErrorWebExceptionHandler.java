package io.registrycache.api;

import java.util.List;
import org.springframework.core.annotation.Order;
import org.springframework.http.HttpHeaders;
import org.springframework.http.codec.HttpMessageWriter;
import org.springframework.http.codec.ServerCodecConfigurer;
import org.springframework.http.server.reactive.ServerHttpRequest;
import org.springframework.stereotype.Component;
import org.springframework.web.reactive.function.server.ServerResponse;
import org.springframework.web.reactive.result.view.ViewResolver;
import org.springframework.web.server.ServerWebExchange;
import org.springframework.web.server.WebExceptionHandler;
import reactor.core.publisher.Mono;

/**
 * OCI error bodies for {@code /v2} failures that escape the handler: those raised while the
 * response body is produced (an upstream that closes right after its headers, a full disk while a
 * blob is stored), and Spring's own (a request it cannot read). Without it they would get Spring
 * Boot's generic error JSON with status 500. Runs before Spring Boot's handler ({@code -1}); other
 * paths (the management port) are left to it. A response already committed cannot change: the error
 * then goes on and the connection is closed, which a client sees as a cut-off body.
 */
@Component
@Order(-2)
public class OciErrorWebExceptionHandler implements WebExceptionHandler {

  /** Headers of the success response that was being written and must not describe the error. */
  private static final List<String> CONTENT_HEADERS =
      List.of(
          HttpHeaders.CONTENT_TYPE,
          HttpHeaders.CONTENT_LENGTH,
          HttpHeaders.CONTENT_RANGE,
          HttpHeaders.ACCEPT_RANGES,
          HttpHeaders.ETAG,
          RegistryHandler.DOCKER_CONTENT_DIGEST);

  private final ServerResponse.Context context;

  public OciErrorWebExceptionHandler(ServerCodecConfigurer codecs) {
    List<HttpMessageWriter<?>> writers = codecs.getWriters();
    this.context =
        new ServerResponse.Context() {
          @Override
          public List<HttpMessageWriter<?>> messageWriters() {
            return writers;
          }

          @Override
          public List<ViewResolver> viewResolvers() {
            return List.of();
          }
        };
  }

  @Override
  public Mono<Void> handle(ServerWebExchange exchange, Throwable error) {
    ServerHttpRequest request = exchange.getRequest();
    if (!request.getPath().value().startsWith("/v2") || exchange.getResponse().isCommitted()) {
      return Mono.error(error);
    }
    HttpHeaders headers = exchange.getResponse().getHeaders();
    CONTENT_HEADERS.forEach(headers::remove);
    return OciErrors.toResponse(request.getMethod(), request.getPath().value(), error)
        .flatMap(response -> response.writeTo(exchange, context));
  }
}
