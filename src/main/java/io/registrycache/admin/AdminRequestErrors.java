package io.registrycache.admin;

import java.util.Map;
import org.springframework.beans.factory.annotation.Value;
import org.springframework.core.annotation.Order;
import org.springframework.core.io.buffer.DataBuffer;
import org.springframework.http.MediaType;
import org.springframework.http.server.reactive.ServerHttpResponse;
import org.springframework.stereotype.Component;
import org.springframework.web.server.ResponseStatusException;
import org.springframework.web.server.ServerWebExchange;
import org.springframework.web.server.WebExceptionHandler;
import reactor.core.publisher.Mono;
import tools.jackson.core.JacksonException;
import tools.jackson.core.TokenStreamLocation;
import tools.jackson.core.exc.StreamReadException;
import tools.jackson.databind.json.JsonMapper;

/**
 * The admin API's answer to a request the actuator refuses before {@link CacheEndpoint} sees it: a
 * body that is not JSON, or not a JSON object of strings, numbers and booleans, or a parameter that
 * does not convert (e.g. {@code "keep":"x"}). Spring Boot's error JSON would say {@code "Bad
 * Request"} and nothing more; this answers the endpoint's own shape, {@code {"error": "..."}} with
 * the same 4xx status, saying what is wrong (for JSON: the parser's reason, line and column). Only
 * for paths of the {@code cache} endpoint; runs before Spring Boot's handler ({@code -1}) and the
 * pull port's ({@code api.OciErrorWebExceptionHandler}, {@code -2}).
 */
@Component
@Order(-3)
public class AdminRequestErrors implements WebExceptionHandler {

  private static final JsonMapper JSON = JsonMapper.builder().build();

  private final String cachePath;

  public AdminRequestErrors(
      @Value("${management.endpoints.web.base-path:/actuator}") String basePath) {
    this.cachePath =
        (basePath.endsWith("/") ? basePath.substring(0, basePath.length() - 1) : basePath)
            + "/cache";
  }

  @Override
  public Mono<Void> handle(ServerWebExchange exchange, Throwable error) {
    String path = exchange.getRequest().getPath().pathWithinApplication().value();
    ServerHttpResponse response = exchange.getResponse();
    if (!(path.equals(cachePath) || path.startsWith(cachePath + "/"))
        || !(error instanceof ResponseStatusException status)
        || !status.getStatusCode().is4xxClientError()
        || response.isCommitted()) {
      return Mono.error(error);
    }
    byte[] body = JSON.writeValueAsBytes(Map.of("error", message(status)));
    response.setStatusCode(status.getStatusCode());
    response.getHeaders().setContentType(MediaType.APPLICATION_JSON);
    response.getHeaders().setContentLength(body.length);
    DataBuffer buffer = response.bufferFactory().wrap(body);
    return response.writeWith(Mono.just(buffer));
  }

  /** What is wrong with the request, in one line. */
  @SuppressWarnings("ReferenceEquality") // a cause that is the throwable itself ends the walk
  static String message(ResponseStatusException error) {
    for (Throwable t = error.getCause(); t != null; t = t.getCause() == t ? null : t.getCause()) {
      if (t instanceof StreamReadException read) {
        return "the request body is not valid JSON: "
            + read.getOriginalMessage()
            + at(read.getLocation());
      }
      if (t instanceof JacksonException other) {
        // Jackson's own text names Java types; say what the endpoint takes instead
        TokenStreamLocation where = other.getLocation();
        return "the request body must be a JSON object whose values are strings, numbers or booleans,"
            + " e.g. {\"digest\": \"sha256:...\"}"
            + (where == null || where.getLineNr() < 1
                ? ""
                : "; at line "
                    + where.getLineNr()
                    + ", column "
                    + where.getColumnNr()
                    + " it is not");
      }
    }
    String reason = error.getReason();
    return reason == null || reason.isBlank() ? "bad request" : firstLine(reason);
  }

  private static String at(TokenStreamLocation location) {
    return location == null || location.getLineNr() < 1
        ? ""
        : " (line " + location.getLineNr() + ", column " + location.getColumnNr() + ")";
  }

  private static String firstLine(String text) {
    String line = text == null ? "" : text.strip();
    int end = line.indexOf('\n');
    return (end < 0 ? line : line.substring(0, end)).strip();
  }
}
