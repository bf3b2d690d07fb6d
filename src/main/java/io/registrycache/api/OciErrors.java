package io.registrycache.api;

import io.registrycache.auth.AuthenticationRequired;
import io.registrycache.auth.Challenges;
import io.registrycache.oci.Json;
import io.registrycache.oci.OciErrorCode;
import io.registrycache.oci.OciException;
import java.io.IOException;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import org.springframework.http.HttpHeaders;
import org.springframework.http.HttpMethod;
import org.springframework.http.HttpStatus;
import org.springframework.http.HttpStatusCode;
import org.springframework.http.MediaType;
import org.springframework.web.reactive.function.server.ServerRequest;
import org.springframework.web.reactive.function.server.ServerResponse;
import org.springframework.web.server.ResponseStatusException;
import reactor.core.publisher.Mono;

/**
 * Turns failures into OCI error responses: status plus {@code
 * {"errors":[{"code":...,"message":...,"detail":...}]}} (OCI Distribution Spec v1.1, "Error
 * Codes"). HEAD responses carry the status and headers only. Used by the handler for failures
 * before the response starts and by {@link OciErrorWebExceptionHandler} for those after it.
 */
final class OciErrors {

  private static final Logger log = LoggerFactory.getLogger(OciErrors.class);

  private OciErrors() {}

  /** The response for {@code error}, logged: 4xx at INFO, 5xx at WARN, unexpected ones at ERROR. */
  static Mono<ServerResponse> toResponse(ServerRequest request, Throwable error) {
    return toResponse(request.method(), request.path(), error);
  }

  /**
   * As {@link #toResponse(ServerRequest, Throwable)}, for a request known by method and raw path.
   */
  static Mono<ServerResponse> toResponse(HttpMethod method, String path, Throwable error) {
    Answer answer = answer(method.name(), path, error);
    ServerResponse.BodyBuilder builder =
        ServerResponse.status(answer.status()).headers(h -> h.addAll(answer.headers()));
    return answer.body() == null
        ? builder.build()
        : builder.contentType(MediaType.APPLICATION_JSON).bodyValue(answer.body());
  }

  /**
   * An error answer, for any server layer.
   *
   * @param status the HTTP status
   * @param headers {@code Retry-After}, {@code Allow}, {@code WWW-Authenticate} as they apply
   * @param body the JSON error body ({@code application/json}), {@code null} for a HEAD request
   */
  @SuppressWarnings("ArrayRecordComponent") // a carrier of bytes, never compared or hashed
  record Answer(HttpStatus status, HttpHeaders headers, byte[] body) {}

  /** The answer for {@code error}, logged: 4xx at INFO, 5xx at WARN, unexpected ones at ERROR. */
  static Answer answer(String method, String path, Throwable error) {
    OciException oci = classify(error);
    if (oci == null) {
      log.error("{} {} failed unexpectedly", method, path, error);
      oci =
          new OciException(
              OciErrorCode.UNKNOWN, "internal error: " + error.getClass().getSimpleName());
    }
    if (oci.status().is5xxServerError() && oci.code() != OciErrorCode.UNAVAILABLE) {
      log.warn(
          "{} {} -> {} {}: {}", method, path, oci.status().value(), oci.code(), oci.getMessage());
    } else if (log.isInfoEnabled()) {
      log.info(
          "{} {} -> {} {}: {}", method, path, oci.status().value(), oci.code(), oci.getMessage());
    }
    HttpHeaders headers = new HttpHeaders();
    oci.retryAfter()
        .ifPresent(
            d -> headers.set(HttpHeaders.RETRY_AFTER, Long.toString(Math.max(1, d.toSeconds()))));
    if (oci.code() == OciErrorCode.UNSUPPORTED) {
      headers.set(HttpHeaders.ALLOW, "GET, HEAD");
    }
    if (oci instanceof AuthenticationRequired required) {
      // the cache's own authentication (registry-cache.auth)
      headers.set(HttpHeaders.WWW_AUTHENTICATE, required.challenge());
    } else if (oci.code() == OciErrorCode.UNAUTHORIZED) {
      // The upstream refused the cache's credentials.
      headers.set(HttpHeaders.WWW_AUTHENTICATE, Challenges.basic("registry-cache upstream"));
    }
    byte[] body =
        "HEAD".equals(method)
            ? null
            : Json.MAPPER.writeValueAsBytes(body(oci.code(), oci.getMessage(), oci.detail()));
    return new Answer(oci.status(), headers, body);
  }

  /** {@code {"errors":[{"code":..., "message":..., "detail":...}]}}; {@code detail} may be null. */
  static Map<String, Object> body(OciErrorCode code, String message, Object detail) {
    Map<String, Object> entry = new LinkedHashMap<>();
    entry.put("code", code.name());
    entry.put("message", message);
    if (detail != null) {
      entry.put("detail", detail);
    }
    return Map.of("errors", List.of(entry));
  }

  /**
   * The OCI error a failure stands for, or {@code null} when it is unexpected (a bug: 500 UNKNOWN).
   * Besides {@link OciException}s (the failure or its nearest cause): a full disk anywhere in the
   * cause chain is 507 (nothing was stored, the client is not at fault), and Spring's own 4xx/5xx
   * statuses (such as a request it could not read) keep their status with the nearest OCI code.
   */
  @SuppressWarnings("ReferenceEquality") // a cause that is the throwable itself ends the walk
  static OciException classify(Throwable error) {
    // the first OCI error in the cause chain: a blocking store call wraps the store's 503 in an
    // IOException, and it is still the store's 503
    for (Throwable t = error; t != null; t = t.getCause() == t ? null : t.getCause()) {
      if (t instanceof OciException e) {
        return e;
      }
    }
    if (isDiskFull(error)) {
      return new OciException(
          OciErrorCode.UNKNOWN,
          HttpStatus.INSUFFICIENT_STORAGE,
          "the cache's storage is full: nothing was stored; retry later (the operator must free space)");
    }
    if (error instanceof ResponseStatusException e) {
      return new OciException(
          codeFor(e.getStatusCode()),
          HttpStatus.valueOf(e.getStatusCode().value()),
          e.getReason() != null
              ? e.getReason()
              : HttpStatus.valueOf(e.getStatusCode().value()).getReasonPhrase());
    }
    return null;
  }

  /** Whether {@code error} is, or was caused by, ENOSPC ("No space left on device"). */
  @SuppressWarnings("ReferenceEquality") // a cause that is the throwable itself ends the walk
  static boolean isDiskFull(Throwable error) {
    for (Throwable t = error; t != null; t = t.getCause() == t ? null : t.getCause()) {
      if (t instanceof IOException
          && t.getMessage() != null
          && t.getMessage().toLowerCase(Locale.ROOT).contains("no space left on device")) {
        return true;
      }
    }
    return false;
  }

  private static OciErrorCode codeFor(HttpStatusCode status) {
    return switch (status.value()) {
      case 400 -> OciErrorCode.NAME_INVALID;
      case 401 -> OciErrorCode.UNAUTHORIZED;
      case 403 -> OciErrorCode.DENIED;
      case 404 -> OciErrorCode.NAME_UNKNOWN;
      case 405 -> OciErrorCode.UNSUPPORTED;
      case 413, 414, 431 -> OciErrorCode.SIZE_INVALID;
      case 416 -> OciErrorCode.RANGE_INVALID;
      case 429 -> OciErrorCode.TOOMANYREQUESTS;
      default -> OciErrorCode.UNKNOWN;
    };
  }
}
