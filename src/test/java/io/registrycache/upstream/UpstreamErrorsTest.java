package io.registrycache.upstream;

import static org.assertj.core.api.Assertions.assertThat;

import io.netty.channel.ConnectTimeoutException;
import io.netty.handler.timeout.ReadTimeoutException;
import io.registrycache.oci.OciErrorCode;
import io.registrycache.testsupport.TestUpstreams;
import java.io.IOException;
import java.net.ConnectException;
import java.net.URI;
import java.net.UnknownHostException;
import java.time.Clock;
import java.time.Duration;
import java.time.Instant;
import java.time.ZoneOffset;
import java.util.List;
import javax.net.ssl.SSLHandshakeException;
import org.junit.jupiter.api.Test;
import org.springframework.http.HttpHeaders;
import org.springframework.http.HttpMethod;
import org.springframework.http.HttpStatus;
import org.springframework.web.reactive.function.client.WebClientRequestException;
import reactor.netty.http.client.PrematureCloseException;

class UpstreamErrorsTest {

  private static final Clock CLOCK =
      Clock.fixed(Instant.parse("2025-01-01T12:00:00Z"), ZoneOffset.UTC);
  private static final Upstream UPSTREAM =
      TestUpstreams.upstream("hub", "https://registry.example.test", s -> {});

  @Test
  void retryAfterSeconds() {
    assertThat(UpstreamErrors.parseRetryAfter("120", CLOCK)).isEqualTo(Duration.ofSeconds(120));
    assertThat(UpstreamErrors.parseRetryAfter(" 0 ", CLOCK)).isEqualTo(Duration.ZERO);
  }

  @Test
  void retryAfterHttpDate() {
    assertThat(UpstreamErrors.parseRetryAfter("Wed, 01 Jan 2025 12:01:30 GMT", CLOCK))
        .isEqualTo(Duration.ofSeconds(90));
    assertThat(UpstreamErrors.parseRetryAfter("Wed, 01 Jan 2025 11:00:00 GMT", CLOCK))
        .as("past")
        .isEqualTo(Duration.ZERO);
  }

  @Test
  void retryAfterAbsentOrGarbage() {
    assertThat(UpstreamErrors.parseRetryAfter(null, CLOCK)).isNull();
    assertThat(UpstreamErrors.parseRetryAfter("", CLOCK)).isNull();
    assertThat(UpstreamErrors.parseRetryAfter("soon", CLOCK)).isNull();
    assertThat(UpstreamErrors.parseRetryAfter("-5", CLOCK)).isNull();
    assertThat(UpstreamErrors.parseRetryAfter("99999999999999999999999", CLOCK)).isNull();
  }

  @Test
  void statusMapping() {
    assertThat(map(404, OciErrorCode.BLOB_UNKNOWN))
        .satisfies(
            e -> {
              assertThat(e.code()).isEqualTo(OciErrorCode.BLOB_UNKNOWN);
              assertThat(e.status()).isEqualTo(HttpStatus.NOT_FOUND);
            });
    assertThat(map(404, OciErrorCode.NAME_UNKNOWN).code()).isEqualTo(OciErrorCode.NAME_UNKNOWN);
    assertThat(map(401, OciErrorCode.BLOB_UNKNOWN).code()).isEqualTo(OciErrorCode.UNAUTHORIZED);
    assertThat(map(403, OciErrorCode.BLOB_UNKNOWN).code()).isEqualTo(OciErrorCode.DENIED);
    assertThat(map(429, OciErrorCode.BLOB_UNKNOWN))
        .satisfies(
            e -> {
              assertThat(e.code()).isEqualTo(OciErrorCode.TOOMANYREQUESTS);
              assertThat(e.retryAfter()).contains(Duration.ofSeconds(30));
            });
    assertThat(map(500, OciErrorCode.BLOB_UNKNOWN).status()).isEqualTo(HttpStatus.BAD_GATEWAY);
    assertThat(map(502, OciErrorCode.BLOB_UNKNOWN).status()).isEqualTo(HttpStatus.BAD_GATEWAY);
    assertThat(map(504, OciErrorCode.BLOB_UNKNOWN).status()).isEqualTo(HttpStatus.BAD_GATEWAY);
    assertThat(map(503, OciErrorCode.BLOB_UNKNOWN).status())
        .isEqualTo(HttpStatus.SERVICE_UNAVAILABLE);
    assertThat(map(418, OciErrorCode.BLOB_UNKNOWN))
        .satisfies(
            e -> {
              assertThat(e.code()).isEqualTo(OciErrorCode.UPSTREAM_UNAVAILABLE);
              assertThat(e.status()).isEqualTo(HttpStatus.BAD_GATEWAY);
            });
    assertThat(map(500, OciErrorCode.BLOB_UNKNOWN).getMessage())
        .startsWith("upstream 'hub' (https://registry.example.test): ")
        .contains("blob x@y")
        .contains("500");
  }

  @Test
  void transportMapping() {
    assertThat(
            UpstreamErrors.fromTransport(
                UPSTREAM, "x", wrapped(new ConnectException("Connection refused"))))
        .satisfies(
            e -> {
              assertThat(e.status()).isEqualTo(HttpStatus.BAD_GATEWAY);
              assertThat(UpstreamErrors.outcome(e)).isEqualTo(UpstreamErrors.UNREACHABLE);
            });
    assertThat(
            UpstreamErrors.fromTransport(
                UPSTREAM, "x", wrapped(new UnknownHostException("nowhere"))))
        .satisfies(
            e -> {
              assertThat(e.getMessage()).contains("unknown host");
              assertThat(UpstreamErrors.outcome(e)).isEqualTo(UpstreamErrors.UNREACHABLE);
            });
    assertThat(UpstreamErrors.fromTransport(UPSTREAM, "x", wrapped(ReadTimeoutException.INSTANCE)))
        .satisfies(
            e -> {
              assertThat(e.status()).isEqualTo(HttpStatus.GATEWAY_TIMEOUT);
              assertThat(UpstreamErrors.outcome(e)).isEqualTo(UpstreamErrors.TIMEOUT);
            });
    assertThat(
            UpstreamErrors.fromTransport(
                UPSTREAM, "x", wrapped(new ConnectTimeoutException("connect timed out"))))
        .satisfies(
            e -> {
              assertThat(e.status()).isEqualTo(HttpStatus.GATEWAY_TIMEOUT);
              assertThat(e.getMessage()).contains("connect-timeout");
            });
    assertThat(UpstreamErrors.fromTransport(UPSTREAM, "x", new SSLHandshakeException("PKIX path")))
        .satisfies(e -> assertThat(e.getMessage()).contains("TLS failed").contains("ca-file"));
  }

  /**
   * Registry requests go out on Reactor Netty's {@code HttpClient} itself, whose failures arrive
   * unwrapped (token requests, on WebClient, wrapped): both classify alike.
   */
  @Test
  void reactorNettyFailuresUnwrappedMapAsWrapped() {
    for (Throwable cause :
        List.of(
            new ConnectException("Connection refused"),
            new UnknownHostException("nowhere"),
            ReadTimeoutException.INSTANCE,
            new ConnectTimeoutException("connect timed out"),
            PrematureCloseException.TEST_EXCEPTION,
            new IOException("Connection reset by peer"))) {
      assertThat(TransportFailure.of(cause))
          .as(cause.toString())
          .isEqualTo(TransportFailure.of(wrapped(cause)));
      UpstreamException raw = UpstreamErrors.fromTransport(UPSTREAM, "x", cause);
      UpstreamException viaWebClient = UpstreamErrors.fromTransport(UPSTREAM, "x", wrapped(cause));
      assertThat(raw.status()).as(cause.toString()).isEqualTo(viaWebClient.status());
      assertThat(raw.getMessage()).as(cause.toString()).isEqualTo(viaWebClient.getMessage());
      assertThat(UpstreamErrors.outcome(raw))
          .as(cause.toString())
          .isEqualTo(UpstreamErrors.outcome(viaWebClient));
    }
    assertThat(UpstreamErrors.fromTransport(UPSTREAM, "x", ReadTimeoutException.INSTANCE).status())
        .isEqualTo(HttpStatus.GATEWAY_TIMEOUT);
    assertThat(TransportFailure.of(PrematureCloseException.TEST_EXCEPTION))
        .isEqualTo(TransportFailure.CLOSED_EARLY);
  }

  @Test
  void oneClassifierDecidesTheErrorTheRetryAndTheOutcome() {
    record Case(
        Throwable failure, TransportFailure kind, UpstreamFailures.Kind retry, HttpStatus status) {}
    for (Case c :
        List.of(
            new Case(
                wrapped(new ConnectException("refused")),
                TransportFailure.UNREACHABLE,
                UpstreamFailures.Kind.TRANSIENT,
                HttpStatus.BAD_GATEWAY),
            new Case(
                wrapped(new ConnectTimeoutException("slow")),
                TransportFailure.CONNECT_TIMEOUT,
                UpstreamFailures.Kind.TRANSIENT,
                HttpStatus.GATEWAY_TIMEOUT),
            new Case(
                wrapped(ReadTimeoutException.INSTANCE),
                TransportFailure.READ_TIMEOUT,
                UpstreamFailures.Kind.FAILED,
                HttpStatus.GATEWAY_TIMEOUT),
            new Case(
                new TransportFailure.SlowTransferException("below 1KB/s"),
                TransportFailure.SLOW_TRANSFER,
                UpstreamFailures.Kind.FAILED,
                HttpStatus.GATEWAY_TIMEOUT),
            new Case(
                wrapped(new UnknownHostException("nowhere")),
                TransportFailure.UNKNOWN_HOST,
                UpstreamFailures.Kind.TRANSIENT,
                HttpStatus.BAD_GATEWAY),
            new Case(
                new SSLHandshakeException("PKIX"),
                TransportFailure.TLS,
                UpstreamFailures.Kind.FAILED,
                HttpStatus.BAD_GATEWAY),
            new Case(
                new IOException("reset"),
                TransportFailure.IO,
                UpstreamFailures.Kind.TRANSIENT,
                HttpStatus.BAD_GATEWAY),
            new Case(
                new IllegalStateException("?"),
                TransportFailure.OTHER,
                UpstreamFailures.Kind.FAILED,
                HttpStatus.BAD_GATEWAY))) {
      assertThat(TransportFailure.of(c.failure())).as(c.toString()).isEqualTo(c.kind());
      UpstreamException mapped = UpstreamErrors.fromTransport(UPSTREAM, "x", c.failure());
      assertThat(mapped.status()).as(c.toString()).isEqualTo(c.status());
      assertThat(UpstreamFailures.classify(mapped, Duration.ofSeconds(2)))
          .as(c.toString())
          .isEqualTo(c.retry());
    }
  }

  @Test
  void outcomes() {
    assertThat(UpstreamErrors.outcome(map(404, OciErrorCode.MANIFEST_UNKNOWN)))
        .isEqualTo(UpstreamErrors.NOT_FOUND);
    assertThat(UpstreamErrors.outcome(map(401, OciErrorCode.MANIFEST_UNKNOWN)))
        .isEqualTo(UpstreamErrors.CLIENT_ERROR);
    assertThat(UpstreamErrors.outcome(map(429, OciErrorCode.MANIFEST_UNKNOWN)))
        .isEqualTo(UpstreamErrors.CLIENT_ERROR);
    assertThat(UpstreamErrors.outcome(map(500, OciErrorCode.MANIFEST_UNKNOWN)))
        .isEqualTo(UpstreamErrors.SERVER_ERROR);
  }

  @Test
  void describeReadsOciErrorBodies() {
    assertThat(
            UpstreamErrors.describe(
                "{\"errors\":[{\"code\":\"DENIED\",\"message\":\"requested access is denied\"}]}"))
        .isEqualTo(" DENIED: requested access is denied");
    assertThat(UpstreamErrors.describe("<html>502 Bad Gateway</html>")).isEmpty();
    // Parsed as JSON, not matched: escapes are decoded, the first error is the one described,
    // "code" inside another field's text is not mistaken for the code.
    assertThat(
            UpstreamErrors.describe(
                "{\"detail\":\"\\\"code\\\":\\\"FAKE\\\"\",\"errors\":[{\"message\":\"tag \\\"v1\\\" unknown\","
                    + "\"code\":\"MANIFEST_UNKNOWN\"},{\"code\":\"DENIED\"}]}"))
        .isEqualTo(" MANIFEST_UNKNOWN: tag \"v1\" unknown");
    assertThat(UpstreamErrors.describe("{\"errors\":[{\"code\":\"DENIED\",\"mess"))
        .as("truncated")
        .isEmpty();
    assertThat(UpstreamErrors.describe(null)).isEmpty();
  }

  private static UpstreamException map(int status, OciErrorCode notFound) {
    return UpstreamErrors.fromStatus(UPSTREAM, "blob x@y", notFound, status, "30", null, CLOCK);
  }

  private static Throwable wrapped(Throwable cause) {
    return new WebClientRequestException(
        cause, HttpMethod.GET, URI.create("https://registry.example.test/v2/"), new HttpHeaders());
  }
}
