package io.registrycache.api;

import static org.assertj.core.api.Assertions.assertThat;

import io.registrycache.oci.OciErrorCode;
import io.registrycache.oci.OciException;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import org.junit.jupiter.api.Test;
import org.springframework.http.HttpHeaders;

/** What a failure becomes on the wire: status, headers and the OCI error body. */
class OciErrorsTest {

  static final OciException STORE_DOWN =
      new OciException(
          OciErrorCode.UNAVAILABLE,
          OciErrorCode.UNAVAILABLE.defaultStatus(),
          "the cache's object store could not be reached; retry",
          null,
          Duration.ofSeconds(1),
          new IllegalStateException("connection reset"));

  @Test
  void anOciErrorInsideABlockingCallsIoErrorKeepsItsStatusCodeAndRetryAfter() {
    // S3Calls.await wraps every store failure as "object store: ..." IOException
    Throwable wrapped =
        new UncheckedIOException(new IOException("object store: " + STORE_DOWN, STORE_DOWN));

    OciErrors.Answer answer = OciErrors.answer("GET", "/v2/library/a/blobs/sha256:00", wrapped);

    assertThat(answer.status().value()).isEqualTo(503);
    assertThat(answer.headers().getFirst(HttpHeaders.RETRY_AFTER)).isEqualTo("1");
    assertThat(new String(answer.body(), StandardCharsets.UTF_8))
        .contains("\"code\":\"UNAVAILABLE\"")
        .contains("object store could not be reached");
  }

  @Test
  void aFailureWithNoOciErrorInItsChainIsStillA500Unknown() {
    OciErrors.Answer answer =
        OciErrors.answer(
            "GET",
            "/v2/library/a/blobs/sha256:00",
            new IOException("object store: boom", new IllegalStateException("boom")));

    assertThat(answer.status().value()).isEqualTo(500);
    assertThat(new String(answer.body(), StandardCharsets.UTF_8)).contains("\"code\":\"UNKNOWN\"");
  }
}
