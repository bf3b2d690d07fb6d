package io.registrycache.upstream;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import io.registrycache.oci.Digest;
import io.registrycache.oci.MediaTypes;
import io.registrycache.oci.OciErrorCode;
import io.registrycache.oci.Reference;
import io.registrycache.oci.RepositoryName;
import io.registrycache.testsupport.ImagePusher;
import io.registrycache.testsupport.PushedImage;
import io.registrycache.testsupport.TestImages;
import io.registrycache.testsupport.TestImages.Image;
import io.registrycache.testsupport.TestUpstreams;
import io.registrycache.testsupport.UpstreamRegistryContainer;
import java.nio.charset.StandardCharsets;
import java.security.MessageDigest;
import java.time.Duration;
import java.util.HexFormat;
import java.util.concurrent.atomic.AtomicLong;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.springframework.core.io.buffer.DataBufferUtils;
import org.springframework.http.HttpStatus;

/** Pulls from a real distribution registry ({@code registry:2}, anonymous). */
class ReactorNettyUpstreamClientIT {

  private static final Duration WAIT = Duration.ofSeconds(30);
  private static final RepositoryName NAME = RepositoryName.parse("test/app");

  static final UpstreamRegistryContainer REGISTRY = UpstreamRegistryContainer.started();

  static SimpleMeterRegistry meters;
  static ReactorNettyUpstreamClient client;
  static Upstream upstream;
  static PushedImage image;

  @BeforeAll
  static void pushContent() {
    String url = REGISTRY.baseUrl();
    ImagePusher pusher = REGISTRY.pusher();
    Image pushed =
        pusher.push(TestImages.withLayers(NAME.value(), "v1", TestImages.randomBytes(300_000, 42)));
    for (String tag : new String[] {"v2", "v3", "alpha", "beta"}) {
      pusher.pushManifest(NAME.value(), tag, pushed.manifest());
    }
    image = PushedImage.of(pushed);
    upstream =
        TestUpstreams.upstream("it-anon", url, s -> s.put("read-timeout", Duration.ofSeconds(10)));
    meters = new SimpleMeterRegistry();
    client = new ReactorNettyUpstreamClient(null, meters);
  }

  @AfterAll
  static void close() {
    client.destroy();
    REGISTRY.stop();
  }

  @Test
  void manifestByTagIsTheExactBytesWithTheirDigest() throws Exception {
    UpstreamManifest manifest =
        client
            .getManifest(upstream, NAME, Reference.parse("v1"), MediaTypes.ALL_MANIFESTS, 4 << 20)
            .block(WAIT);

    assertThat(manifest.body()).isEqualTo(image.manifest());
    assertThat(sha256Hex(manifest.body())).isEqualTo(image.manifestDigest().hex());
    assertThat(manifest.upstreamDigest()).isEqualTo(image.manifestDigest());
    assertThat(manifest.mediaType()).isEqualTo(MediaTypes.OCI_MANIFEST);
    assertThat(
            meters
                .get(UpstreamMetrics.REQUEST_TIMER)
                .tags("upstream", "it-anon", "kind", "manifest", "outcome", "success")
                .timer()
                .count())
        .isPositive();
  }

  @Test
  void manifestByDigest() {
    UpstreamManifest manifest =
        client
            .getManifest(
                upstream,
                NAME,
                new Reference.ByDigest(image.manifestDigest()),
                MediaTypes.ALL_MANIFESTS,
                4 << 20)
            .block(WAIT);

    assertThat(manifest.body()).isEqualTo(image.manifest());
    assertThat(manifest.upstreamDigest()).isEqualTo(image.manifestDigest());
  }

  @Test
  void headManifestGivesDigestSizeAndType() {
    UpstreamManifestHead head =
        client
            .headManifest(upstream, NAME, Reference.parse("v1"), MediaTypes.ALL_MANIFESTS)
            .block(WAIT);

    assertThat(head.digest()).isEqualTo(image.manifestDigest());
    assertThat(head.size()).isEqualTo(image.manifest().length);
    assertThat(head.mediaType()).isEqualTo(MediaTypes.OCI_MANIFEST);
  }

  @Test
  void manifestAboveMaxBytesIsManifestInvalid() {
    assertThatThrownBy(
            () ->
                client
                    .getManifest(
                        upstream, NAME, Reference.parse("v1"), MediaTypes.ALL_MANIFESTS, 100)
                    .block(WAIT))
        .isInstanceOfSatisfying(
            UpstreamException.class,
            e -> {
              assertThat(e.code()).isEqualTo(OciErrorCode.MANIFEST_INVALID);
              assertThat(e.getMessage()).contains("it-anon").contains("100 bytes");
            });
  }

  @Test
  void blobStreamsWithTheRightDigestAndSize() throws Exception {
    double before = fetchedBytes();
    UpstreamBlob blob = client.getBlob(upstream, NAME, image.layerDigest()).block(WAIT);
    assertThat(blob.size()).isEqualTo(image.layer().length);

    MessageDigest sha256 = MessageDigest.getInstance("SHA-256");
    AtomicLong size = new AtomicLong();
    AtomicLong chunks = new AtomicLong();
    blob.body()
        .doOnNext(
            buffer -> {
              chunks.incrementAndGet();
              byte[] bytes = new byte[buffer.readableByteCount()];
              buffer.read(bytes);
              DataBufferUtils.release(buffer);
              sha256.update(bytes);
              size.addAndGet(bytes.length);
            })
        .blockLast(WAIT);

    assertThat(size.get()).isEqualTo(image.layer().length);
    assertThat(image.layerDigest().matches(sha256)).isTrue();
    assertThat(chunks.get()).as("streamed in chunks, not buffered whole").isGreaterThan(1);
    assertThat(fetchedBytes() - before).isEqualTo(image.layer().length);
  }

  @Test
  void headBlobGivesSize() {
    assertThat(client.headBlob(upstream, NAME, image.configDigest()).block(WAIT))
        .isEqualTo(image.config().length);
  }

  @Test
  void missingManifestIsManifestUnknown() {
    assertThatThrownBy(
            () ->
                client
                    .getManifest(
                        upstream, NAME, Reference.parse("nope"), MediaTypes.ALL_MANIFESTS, 4 << 20)
                    .block(WAIT))
        .isInstanceOfSatisfying(
            UpstreamException.class,
            e -> {
              assertThat(e.code()).isEqualTo(OciErrorCode.MANIFEST_UNKNOWN);
              assertThat(e.status()).isEqualTo(HttpStatus.NOT_FOUND);
              assertThat(e.isNotFound()).isTrue();
              assertThat(e.upstreamKey()).isEqualTo("it-anon");
              assertThat(e.getMessage()).contains("it-anon").contains("test/app:nope");
            });
    assertThatThrownBy(
            () ->
                client
                    .headManifest(upstream, NAME, Reference.parse("nope"), MediaTypes.ALL_MANIFESTS)
                    .block(WAIT))
        .isInstanceOfSatisfying(
            UpstreamException.class,
            e -> assertThat(e.code()).isEqualTo(OciErrorCode.MANIFEST_UNKNOWN));
    assertThat(
            meters
                .get(UpstreamMetrics.REQUEST_TIMER)
                .tags("upstream", "it-anon", "kind", "manifest", "outcome", "not_found")
                .timer()
                .count())
        .isPositive();
  }

  @Test
  void missingBlobIsBlobUnknown() {
    Digest missing = Digest.sha256("not pushed".getBytes(StandardCharsets.UTF_8));
    assertThatThrownBy(() -> client.getBlob(upstream, NAME, missing).block(WAIT))
        .isInstanceOfSatisfying(
            UpstreamException.class,
            e -> {
              assertThat(e.code()).isEqualTo(OciErrorCode.BLOB_UNKNOWN);
              assertThat(e.status()).isEqualTo(HttpStatus.NOT_FOUND);
            });
    assertThatThrownBy(() -> client.headBlob(upstream, NAME, missing).block(WAIT))
        .isInstanceOfSatisfying(
            UpstreamException.class,
            e -> assertThat(e.code()).isEqualTo(OciErrorCode.BLOB_UNKNOWN));
  }

  @Test
  void tagsListIsTheUpstreamBody() {
    // registry:2 (distribution 2.8) ignores n and last and sends no Link; paging and Link are
    // covered against a scripted upstream in LocalUpstreamTest.
    UpstreamTags tags = client.listTags(upstream, NAME, null, null).block(WAIT);
    assertThat(new String(tags.body(), StandardCharsets.UTF_8))
        .contains("\"name\":\"test/app\"")
        .contains("\"alpha\"", "\"beta\"", "\"v1\"", "\"v2\"", "\"v3\"");
    assertThat(client.listTags(upstream, NAME, 2, "alpha").block(WAIT).body()).isNotEmpty();
  }

  @Test
  void tagsOfUnknownRepositoryIsNameUnknown() {
    assertThatThrownBy(
            () ->
                client.listTags(upstream, RepositoryName.parse("no/such"), null, null).block(WAIT))
        .isInstanceOfSatisfying(
            UpstreamException.class,
            e -> {
              assertThat(e.code()).isEqualTo(OciErrorCode.NAME_UNKNOWN);
              assertThat(e.status()).isEqualTo(HttpStatus.NOT_FOUND);
            });
  }

  private static double fetchedBytes() {
    var counter = meters.find(UpstreamMetrics.FETCHED_BYTES).tag("upstream", "it-anon").counter();
    return counter == null ? 0 : counter.count();
  }

  private static String sha256Hex(byte[] bytes) throws Exception {
    return HexFormat.of().formatHex(MessageDigest.getInstance("SHA-256").digest(bytes));
  }
}
