package io.registrycache.storage.s3;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.registrycache.oci.OciErrorCode;
import io.registrycache.oci.OciException;
import io.registrycache.testsupport.S3Settings;
import io.registrycache.testsupport.S3TestServer;
import io.registrycache.testsupport.Sha256;
import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.net.InetAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.time.Instant;
import java.util.Arrays;
import java.util.List;
import java.util.Optional;
import java.util.Random;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.RegisterExtension;
import org.junit.jupiter.api.io.TempDir;
import org.springframework.http.HttpRange;
import org.springframework.util.unit.DataSize;
import reactor.core.publisher.Flux;
import reactor.core.publisher.Mono;
import software.amazon.awssdk.core.exception.SdkClientException;
import software.amazon.awssdk.services.s3.model.NoSuchKeyException;

/**
 * {@link S3Objects} against a real S3-API server in this JVM (s3proxy, signature v4 required), over
 * loopback HTTP: the object operations the S3 store will stand on, and above all that a multipart
 * upload is invisible until completed and leaves nothing when aborted.
 */
class S3ObjectsTest {

  static final String BUCKET = "registry-cache-test";

  @RegisterExtension final S3TestServer s3 = S3TestServer.eachTest(BUCKET);

  @TempDir Path dir;
  S3Objects objects;

  @BeforeEach
  void openObjects() {
    objects = S3Objects.create(s3.settings().build());
  }

  Path file(int bytes, long seed) throws Exception {
    byte[] content = new byte[bytes];
    new Random(seed).nextBytes(content);
    Path f = Files.createTempFile(dir, "content", ".bin");
    Files.write(f, content);
    return f;
  }

  byte[] read(String key, Optional<HttpRange> range, long size) {
    return Flux.from(objects.open(key, range, size))
        .reduce(
            new ByteArrayOutputStream(),
            (out, b) -> {
              byte[] chunk = new byte[b.remaining()];
              b.get(chunk);
              out.writeBytes(chunk);
              return out;
            })
        .map(ByteArrayOutputStream::toByteArray)
        .block(Duration.ofSeconds(30));
  }

  @Test
  void aWholeObjectIsWrittenFromAFileRegionAndReadWholeOrRanged() throws Exception {
    Path f = file(10_000, 1);
    byte[] all = Files.readAllBytes(f);
    assertThat(objects.stat("blobs/a").block()).isEmpty();

    objects.putFile("blobs/a", f, 1_000, 5_000).block(Duration.ofSeconds(30));

    assertThat(objects.stat("blobs/a").block())
        .hasValueSatisfying(i -> assertThat(i.size()).isEqualTo(5_000));
    assertThat(read("blobs/a", Optional.empty(), 5_000))
        .isEqualTo(Arrays.copyOfRange(all, 1_000, 6_000));
    assertThat(read("blobs/a", Optional.of(HttpRange.createByteRange(10, 19)), 5_000))
        .isEqualTo(Arrays.copyOfRange(all, 1_010, 1_020));
    assertThat(read("blobs/a", Optional.of(HttpRange.createSuffixRange(7)), 5_000))
        .isEqualTo(Arrays.copyOfRange(all, 5_993, 6_000));
    assertThat(objects.list("blobs/").collectList().block()).containsExactly("blobs/a");

    objects.delete("blobs/a").block();
    objects.delete("blobs/a").block(); // absent: still fine
    assertThat(objects.stat("blobs/a").block()).isEmpty();
    assertThatThrownBy(() -> read("blobs/a", Optional.empty(), 0))
        .isInstanceOf(NoSuchKeyException.class);
  }

  @Test
  void aMultipartUploadIsInvisibleUntilCompletedAndThenHasExactlyItsParts() throws Exception {
    int size = (int) S3StorageProperties.MIN_PART_BYTES + 12_345;
    Path f = file(size, 2);
    S3Objects.Upload upload = objects.startUpload("blobs/big").block();
    upload.addPart(f, 0, S3StorageProperties.MIN_PART_BYTES);
    upload.addPart(
        f, S3StorageProperties.MIN_PART_BYTES, size - S3StorageProperties.MIN_PART_BYTES);

    assertThat(objects.stat("blobs/big").block()).isEmpty();
    assertThat(objects.list("blobs/").collectList().block()).isEmpty();

    upload.complete().block(Duration.ofSeconds(60));

    assertThat(objects.stat("blobs/big").block())
        .hasValueSatisfying(i -> assertThat(i.size()).isEqualTo(size));
    assertThat(Sha256.digest(read("blobs/big", Optional.empty(), size)))
        .isEqualTo(Sha256.digest(f));
  }

  @Test
  void anAbortedUploadLeavesNothingAndAbandonedUploadsAreFoundAndAborted() throws Exception {
    Path f = file(1_000, 3);
    S3Objects.Upload aborted = objects.startUpload("blobs/aborted").block();
    aborted.addPart(f, 0, 1_000);
    aborted.abort().block(Duration.ofSeconds(30));
    assertThat(objects.stat("blobs/aborted").block()).isEmpty();

    // A replica killed mid-fill: its upload stays open until someone aborts it.
    S3Objects.Upload abandoned = objects.startUpload("blobs/abandoned").block();
    abandoned.addPart(f, 0, 1_000);
    assertThat(objects.abortUploadsStartedBefore(Instant.now().minusSeconds(3600)).block())
        .isZero();
    assertThat(objects.abortUploadsStartedBefore(Instant.now().plusSeconds(60)).block())
        .isEqualTo(1);
    assertThatThrownBy(() -> abandoned.complete().block(Duration.ofSeconds(30))).isNotNull();
    assertThat(objects.stat("blobs/abandoned").block()).isEmpty();
  }

  @Test
  void aPresignedUrlServesTheObjectToAPlainHttpClient() throws Exception {
    Path f = file(2_048, 4);
    objects.putFile("blobs/p", f, 0, 2_048).block(Duration.ofSeconds(30));
    HttpResponse<byte[]> response =
        HttpClient.newHttpClient()
            .send(
                HttpRequest.newBuilder(objects.presignGet("blobs/p")).build(),
                HttpResponse.BodyHandlers.ofByteArray());
    assertThat(response.statusCode()).isEqualTo(200);
    assertThat(response.body()).isEqualTo(Files.readAllBytes(f));
  }

  @Test
  void aStoreThatAcceptsConnectionsAndNeverAnswersFailsTheRequestAfterTheStallTimeout()
      throws Exception {
    // A loopback socket the kernel accepts connections on (the backlog) and nobody ever answers.
    try (ServerSocket silent = new ServerSocket(0, 50, InetAddress.getLoopbackAddress())) {
      S3Objects hung =
          S3Objects.create(
              S3Settings.s3(
                      URI.create("http://127.0.0.1:" + silent.getLocalPort()),
                      BUCKET,
                      "access",
                      "secret")
                  .connectTimeout(Duration.ofSeconds(2))
                  .stallTimeout(Duration.ofSeconds(2))
                  .build());
      long start = System.nanoTime();
      Throwable error =
          hung.stat("blobs/anything")
              .then(Mono.<Throwable>empty())
              .onErrorResume(Mono::just)
              .block(Duration.ofSeconds(60));
      long seconds = Duration.ofNanos(System.nanoTime() - start).toSeconds();
      assertThat(error).as("the request fails instead of hanging").isNotNull();
      assertThat(seconds).as("seconds until it failed").isLessThan(30);
    }
  }

  @Test
  void aStoreThatResetsEveryConnectionGivesTheClientA503ToRetryNotA500() throws Exception {
    // A loopback port that accepts each connection and resets it at once (SO_LINGER 0: RST).
    try (ServerSocket resetting = new ServerSocket(0, 50, InetAddress.getLoopbackAddress())) {
      Thread acceptor =
          Thread.ofVirtual()
              .start(
                  () -> {
                    while (!resetting.isClosed()) {
                      try (Socket s = resetting.accept()) {
                        s.setSoLinger(true, 0);
                      } catch (IOException e) {
                        return;
                      }
                    }
                  });
      S3Objects down =
          S3Objects.create(
              S3Settings.s3(
                      URI.create("http://127.0.0.1:" + resetting.getLocalPort()),
                      BUCKET,
                      "access",
                      "secret")
                  .connectTimeout(Duration.ofSeconds(2))
                  .stallTimeout(Duration.ofSeconds(2))
                  .build());
      Path f = file(100, 3);
      List<Mono<?>> operations =
          List.of(
              down.stat("blobs/a"),
              down.readAll("manifests/a"),
              down.putBytes("manifests/a", new byte[] {1, 2, 3}),
              down.putFile("blobs/a", f, 0, 100),
              down.delete("blobs/a"),
              down.startUpload("blobs/a"),
              down.list("tags/").then(),
              Flux.from(down.open("blobs/a", Optional.empty(), 100)).then());
      for (Mono<?> operation : operations) {
        Throwable error =
            operation
                .then(Mono.<Throwable>empty())
                .onErrorResume(Mono::just)
                .block(Duration.ofSeconds(60));
        assertThat(error)
            .isInstanceOfSatisfying(
                OciException.class,
                e -> {
                  assertThat(e.code()).isEqualTo(OciErrorCode.UNAVAILABLE);
                  assertThat(e.status().value()).isEqualTo(503);
                  assertThat(e.retryAfter()).hasValue(Duration.ofSeconds(1));
                  assertThat(e.getCause()).isInstanceOf(SdkClientException.class);
                });
      }
      down.close();
      resetting.close();
      acceptor.join(Duration.ofSeconds(10));
    }
  }

  @Test
  void secretsStayOutOfTheProperties() {
    S3StorageProperties p =
        S3Settings.s3(null, "b", "AKIDEXAMPLE", "wJalrXUtnFEMI-secret")
            .partSize(DataSize.ofMegabytes(16))
            .build();
    assertThat(p.toString()).doesNotContain("wJalrXUtnFEMI-secret").doesNotContain("AKIDEXAMPLE");
    assertThatThrownBy(
            () -> S3Settings.s3(null, "b", null, null).partSize(DataSize.ofMegabytes(4)).build())
        .hasMessageContaining("at least 5MB");
  }
}
