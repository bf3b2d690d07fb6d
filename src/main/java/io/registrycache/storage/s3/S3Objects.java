package io.registrycache.storage.s3;

import io.registrycache.oci.OciErrorCode;
import io.registrycache.oci.OciException;
import java.io.EOFException;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.net.URI;
import java.nio.ByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.List;
import java.util.Optional;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionException;
import org.reactivestreams.Subscriber;
import org.springframework.http.HttpRange;
import reactor.core.publisher.Flux;
import reactor.core.publisher.Mono;
import reactor.core.scheduler.Schedulers;
import software.amazon.awssdk.auth.credentials.AwsBasicCredentials;
import software.amazon.awssdk.auth.credentials.AwsCredentialsProvider;
import software.amazon.awssdk.auth.credentials.DefaultCredentialsProvider;
import software.amazon.awssdk.auth.credentials.StaticCredentialsProvider;
import software.amazon.awssdk.core.FileRequestBodyConfiguration;
import software.amazon.awssdk.core.async.AsyncRequestBody;
import software.amazon.awssdk.core.async.AsyncResponseTransformer;
import software.amazon.awssdk.core.exception.SdkClientException;
import software.amazon.awssdk.http.crt.AwsCrtAsyncHttpClient;
import software.amazon.awssdk.regions.Region;
import software.amazon.awssdk.services.s3.S3AsyncClient;
import software.amazon.awssdk.services.s3.S3AsyncClientBuilder;
import software.amazon.awssdk.services.s3.S3Configuration;
import software.amazon.awssdk.services.s3.model.CompletedMultipartUpload;
import software.amazon.awssdk.services.s3.model.CompletedPart;
import software.amazon.awssdk.services.s3.model.HeadObjectResponse;
import software.amazon.awssdk.services.s3.model.MultipartUpload;
import software.amazon.awssdk.services.s3.model.NoSuchKeyException;
import software.amazon.awssdk.services.s3.model.S3Exception;
import software.amazon.awssdk.services.s3.presigner.S3Presigner;

/**
 * The cache's objects in one bucket under one key prefix, over the S3 API (AWS SDK for Java v2,
 * asynchronous client on the SDK's CRT HTTP client; see docs/scale-out.md for why not its Netty
 * client). Keys given to and returned by this class are relative to the prefix.
 *
 * <p>Content becomes visible only whole: a multipart upload is invisible until {@link
 * Upload#complete}, which the caller runs after it has verified the digest; {@link Upload#abort}
 * leaves nothing under the key. Uploads abandoned by a killed process are found and aborted by
 * {@link #abortUploadsStartedBefore}.
 *
 * <p>All operations are non-blocking and return {@link Mono}/{@link Flux}. Errors: the SDK's {@link
 * S3Exception} for a 4xx of the store (with its status; 404 as {@link NoSuchKeyException}), and 503
 * {@code UNAVAILABLE} ({@link OciException}, the SDK's exception as its cause) when the store
 * cannot be reached or answers 5xx.
 */
public final class S3Objects implements AutoCloseable {

  /** What a HEAD of an object says: size in bytes and the store's entity tag. */
  public record ObjectInfo(long size, String eTag, Instant lastModified) {}

  /** One object of a listing: its key (relative to the prefix), size in bytes, last write. */
  public record Listed(String key, long size, Instant lastModified) {}

  private static final int REGION_CHUNK = 64 * 1024;

  /** What a client is told to wait before it retries a request the store could not serve. */
  static final Duration RETRY_AFTER = Duration.ofSeconds(1);

  private final S3AsyncClient client;
  private final S3Presigner presigner;
  private final String bucket;
  private final String prefix;
  private final Duration presignTtl;

  S3Objects(
      S3AsyncClient client,
      S3Presigner presigner,
      String bucket,
      String prefix,
      Duration presignTtl) {
    this.client = client;
    this.presigner = presigner;
    this.bucket = bucket;
    this.prefix = prefix.isEmpty() || prefix.endsWith("/") ? prefix : prefix + "/";
    this.presignTtl = presignTtl;
  }

  /**
   * A client for the store the properties describe.
   *
   * @throws IllegalArgumentException without a bucket
   * @throws UncheckedIOException when {@code secret-access-key-file} cannot be read
   */
  public static S3Objects create(S3StorageProperties properties) {
    if (properties.bucket() == null || properties.bucket().isBlank()) {
      throw new IllegalArgumentException(
          "registry-cache.storage.s3.bucket is required for the s3 storage type");
    }
    AwsCredentialsProvider credentials = credentials(properties);
    Region region = Region.of(properties.region());
    S3AsyncClientBuilder client =
        S3AsyncClient.builder()
            .httpClientBuilder(
                AwsCrtAsyncHttpClient.builder()
                    .connectionTimeout(properties.connectTimeout())
                    // A stalled connection (no byte for stall-timeout) fails its request instead of
                    // hanging it.
                    .connectionHealthConfiguration(
                        health ->
                            health
                                .minimumThroughputInBps(1L)
                                .minimumThroughputTimeout(properties.stallTimeout())))
            .region(region)
            .credentialsProvider(credentials)
            .forcePathStyle(properties.pathStyle());
    S3Presigner.Builder presigner =
        S3Presigner.builder()
            .region(region)
            .credentialsProvider(credentials)
            .serviceConfiguration(
                S3Configuration.builder().pathStyleAccessEnabled(properties.pathStyle()).build());
    if (properties.endpoint() != null) {
      client.endpointOverride(properties.endpoint());
      presigner.endpointOverride(properties.endpoint());
    }
    return new S3Objects(
        client.build(),
        presigner.build(),
        properties.bucket(),
        properties.prefix(),
        properties.presignTtl());
  }

  private static AwsCredentialsProvider credentials(S3StorageProperties p) {
    if (p.accessKeyId() == null || p.accessKeyId().isBlank()) {
      return DefaultCredentialsProvider.builder().build();
    }
    String secret = p.secretAccessKey();
    if (p.secretAccessKeyFile() != null) {
      try {
        secret = Files.readString(p.secretAccessKeyFile(), StandardCharsets.UTF_8).strip();
      } catch (IOException e) {
        throw new UncheckedIOException(
            "cannot read registry-cache.storage.s3.secret-access-key-file", e);
      }
    }
    if (secret == null || secret.isBlank()) {
      throw new IllegalArgumentException(
          "registry-cache.storage.s3.access-key-id needs secret-access-key or secret-access-key-file");
    }
    return StaticCredentialsProvider.create(AwsBasicCredentials.create(p.accessKeyId(), secret));
  }

  /** The object's size and entity tag; empty when there is no such object. */
  public Mono<Optional<ObjectInfo>> stat(String key) {
    return Mono.fromFuture(() -> client.headObject(b -> b.bucket(bucket).key(prefix + key)))
        .onErrorMap(S3Objects::unreachable, S3Objects::unavailable)
        .map(S3Objects::info)
        .map(Optional::of)
        .onErrorResume(S3Objects::notFound, e -> Mono.just(Optional.empty()));
  }

  private static ObjectInfo info(HeadObjectResponse head) {
    return new ObjectInfo(head.contentLength(), head.eTag(), head.lastModified());
  }

  /**
   * The object's bytes, whole or one range (RFC 9110 section 14.1.2, mapped to a ranged GET).
   * Errors with {@link NoSuchKeyException} when there is no such object.
   */
  public Flux<ByteBuffer> open(String key, Optional<HttpRange> range, long size) {
    return Mono.fromFuture(
            () ->
                client.getObject(
                    b -> {
                      b.bucket(bucket).key(prefix + key);
                      range.ifPresent(
                          r ->
                              b.range(
                                  "bytes=" + r.getRangeStart(size) + "-" + r.getRangeEnd(size)));
                    },
                    AsyncResponseTransformer.toPublisher()))
        .flatMapMany(Flux::from)
        .onErrorMap(S3Objects::unreachable, S3Objects::unavailable);
  }

  /**
   * The whole object written to {@code file}, which must not exist yet (the SDK creates it; on an
   * error it may leave a partial file for the caller to delete). Errors with {@link
   * NoSuchKeyException} when there is no such object.
   */
  public Mono<Void> download(String key, Path file) {
    return Mono.fromFuture(
            () ->
                client.getObject(
                    b -> b.bucket(bucket).key(prefix + key), AsyncResponseTransformer.toFile(file)))
        .onErrorMap(S3Objects::unreachable, S3Objects::unavailable)
        .then();
  }

  /** Whole-object write of a small object held in memory (a manifest, a tag link). */
  public Mono<Void> putBytes(String key, byte[] bytes) {
    return Mono.fromFuture(
            () ->
                client.putObject(
                    b -> b.bucket(bucket).key(prefix + key).contentLength((long) bytes.length),
                    AsyncRequestBody.fromBytes(bytes)))
        .onErrorMap(S3Objects::unreachable, S3Objects::unavailable)
        .then();
  }

  /** The whole content of a small object; empty when there is no such object. */
  public Mono<Optional<byte[]>> readAll(String key) {
    return Mono.fromFuture(
            () ->
                client.getObject(
                    b -> b.bucket(bucket).key(prefix + key), AsyncResponseTransformer.toBytes()))
        .onErrorMap(S3Objects::unreachable, S3Objects::unavailable)
        .map(r -> Optional.of(r.asByteArray()))
        .onErrorResume(S3Objects::notFound, e -> Mono.just(Optional.empty()));
  }

  /** Whole-object write of {@code length} bytes of {@code file} from {@code position}. */
  public Mono<Void> putFile(String key, Path file, long position, long length) {
    return Mono.fromFuture(
            () ->
                client.putObject(
                    b -> b.bucket(bucket).key(prefix + key).contentLength(length),
                    fileRegion(file, position, length)))
        .onErrorMap(S3Objects::unreachable, S3Objects::unavailable)
        .then();
  }

  /** Starts a multipart upload to {@code key}: nothing is visible under the key until completed. */
  public Mono<Upload> startUpload(String key) {
    return Mono.fromFuture(
            () -> client.createMultipartUpload(b -> b.bucket(bucket).key(prefix + key)))
        .onErrorMap(S3Objects::unreachable, S3Objects::unavailable)
        .map(r -> new Upload(key, r.uploadId()));
  }

  /** Deletes the object; deleting an absent object succeeds (S3 semantics). */
  public Mono<Void> delete(String key) {
    return Mono.fromFuture(() -> client.deleteObject(b -> b.bucket(bucket).key(prefix + key)))
        .onErrorMap(S3Objects::unreachable, S3Objects::unavailable)
        .then();
  }

  /**
   * Keys under {@code keyPrefix} (relative to the store's prefix), in the store's order (UTF-8
   * binary).
   */
  public Flux<String> list(String keyPrefix) {
    return Flux.from(
            client
                .listObjectsV2Paginator(b -> b.bucket(bucket).prefix(prefix + keyPrefix))
                .contents())
        .onErrorMap(S3Objects::unreachable, S3Objects::unavailable)
        .map(o -> o.key().substring(prefix.length()));
  }

  /** Listings of {@link #listContentWithSizes} running at once. */
  static final int LIST_CONCURRENCY = 8;

  /**
   * Objects under {@code keyPrefix} with their sizes and last-write times, in the store's order:
   * one request per 1,000 keys, no content read.
   */
  public Flux<Listed> listWithSizes(String keyPrefix) {
    return Flux.from(
            client
                .listObjectsV2Paginator(b -> b.bucket(bucket).prefix(prefix + keyPrefix))
                .contents())
        .onErrorMap(S3Objects::unreachable, S3Objects::unavailable)
        .map(o -> new Listed(o.key().substring(prefix.length()), o.size(), o.lastModified()));
  }

  /**
   * {@link #listWithSizes} of content-addressed keys ({@code <keyPrefix><algorithm>/<hex>...}) as
   * 32 listings at once, one per algorithm (sha256, sha512) and first hex digit, merged in no
   * particular order: an object store answers separate prefixes in parallel, where one listing is
   * one request after another (1,000 keys each). Keys under other folders are not visited.
   */
  public Flux<Listed> listContentWithSizes(String keyPrefix) {
    List<String> shards = new ArrayList<>();
    for (String algorithm : List.of("sha256", "sha512")) {
      for (char h : "0123456789abcdef".toCharArray()) {
        shards.add(keyPrefix + algorithm + "/" + h);
      }
    }
    return Flux.fromIterable(shards).flatMap(this::listWithSizes, LIST_CONCURRENCY);
  }

  /**
   * Multipart uploads in progress (started, neither completed nor aborted) to keys under {@code
   * keyPrefix}.
   */
  public Flux<String> uploadsInProgress(String keyPrefix) {
    return Flux.from(
            client
                .listMultipartUploadsPaginator(b -> b.bucket(bucket).prefix(prefix + keyPrefix))
                .uploads())
        .onErrorMap(S3Objects::unreachable, S3Objects::unavailable)
        .map(u -> u.key().substring(prefix.length()));
  }

  /**
   * Aborts the multipart uploads under the prefix started before {@code cutoff}: those of a replica
   * killed during a fill. Returns how many were aborted.
   */
  public Mono<Integer> abortUploadsStartedBefore(Instant cutoff) {
    return Flux.from(
            client.listMultipartUploadsPaginator(b -> b.bucket(bucket).prefix(prefix)).uploads())
        .filter(u -> u.initiated().isBefore(cutoff))
        .concatMap(u -> abort(u).thenReturn(u))
        .count()
        .map(Long::intValue);
  }

  /** One multipart upload in progress: its key (relative to the prefix), id and start. */
  public record OpenUpload(String key, String uploadId, Instant initiated) {}

  /** The multipart uploads in progress to exactly {@code key} (one LIST of uploads). */
  public Flux<OpenUpload> uploadsTo(String key) {
    return Flux.from(
            client
                .listMultipartUploadsPaginator(b -> b.bucket(bucket).prefix(prefix + key))
                .uploads())
        .filter(u -> u.key().equals(prefix + key))
        .map(u -> new OpenUpload(key, u.uploadId(), u.initiated()));
  }

  /**
   * Aborts the multipart upload {@code uploadId} to {@code key}; one that is gone already
   * (completed or aborted) succeeds. Errors of the store otherwise.
   */
  public Mono<Void> abortUpload(String key, String uploadId) {
    return Mono.fromFuture(
            () ->
                client.abortMultipartUpload(
                    b -> b.bucket(bucket).key(prefix + key).uploadId(uploadId)))
        .then()
        .onErrorResume(S3Objects::notFound, e -> Mono.empty())
        .onErrorMap(S3Objects::unreachable, S3Objects::unavailable);
  }

  private Mono<Void> abort(MultipartUpload u) {
    return Mono.fromFuture(
            () ->
                client.abortMultipartUpload(
                    b -> b.bucket(bucket).key(u.key()).uploadId(u.uploadId())))
        .then()
        .onErrorResume(S3Objects::notFound, e -> Mono.empty())
        .onErrorMap(S3Objects::unreachable, S3Objects::unavailable);
  }

  /** A presigned GET URL for the object, valid for {@code presign-ttl}: for a 307 to the store. */
  public URI presignGet(String key) {
    return URI.create(
        presigner
            .presignGetObject(
                b ->
                    b.signatureDuration(presignTtl)
                        .getObjectRequest(g -> g.bucket(bucket).key(prefix + key)))
            .url()
            .toString());
  }

  private static AsyncRequestBody fileRegion(Path file, long position, long length) {
    return AsyncRequestBody.fromFile(
        FileRequestBodyConfiguration.builder()
            .path(file)
            .position(position)
            .numBytesToRead(length)
            .build());
  }

  /**
   * A region of a file that may be growing past it, read in 64 KiB chunks on a bounded-elastic
   * thread as the HTTP client asks for them, so a part is never held in the heap. The SDK's own
   * file body ({@link FileRequestBodyConfiguration}) cannot be used here: it fails with "File size
   * changed after reading started" when the file grows during the upload, which a fill's file does.
   * Re-subscribable (each subscription opens the file), so the SDK may retry.
   */
  static AsyncRequestBody growingFileRegion(Path file, long position, long length) {
    Flux<ByteBuffer> body =
        Flux.using(
                () -> FileChannel.open(file, StandardOpenOption.READ),
                channel ->
                    Flux.<ByteBuffer, Long>generate(
                        () -> 0L,
                        (done, sink) -> {
                          int n = (int) Math.min(REGION_CHUNK, length - done);
                          if (n == 0) {
                            sink.complete();
                            return done;
                          }
                          ByteBuffer chunk = ByteBuffer.allocate(n);
                          try {
                            while (chunk.hasRemaining()) {
                              if (channel.read(chunk, position + done + chunk.position()) < 0) {
                                throw new EOFException(
                                    file + " ends before byte " + (position + length));
                              }
                            }
                          } catch (IOException e) {
                            sink.error(e);
                            return done;
                          }
                          sink.next(chunk.flip());
                          return done + n;
                        }),
                channel -> {
                  try {
                    channel.close();
                  } catch (IOException ignored) {
                    // read-only
                  }
                })
            .subscribeOn(Schedulers.boundedElastic());
    return new AsyncRequestBody() {
      @Override
      public Optional<Long> contentLength() {
        return Optional.of(length);
      }

      @Override
      public void subscribe(Subscriber<? super ByteBuffer> s) {
        body.subscribe(s);
      }
    };
  }

  /** Whether {@code e} (as the SDK or a future reports it) says there is no such object (404). */
  static boolean notFound(Throwable e) {
    Throwable t = e instanceof CompletionException && e.getCause() != null ? e.getCause() : e;
    return t instanceof NoSuchKeyException
        || (t instanceof S3Exception s3 && s3.statusCode() == 404);
  }

  /**
   * Whether {@code e} says the store could not be reached or could not answer: a transport failure
   * (the SDK's {@link SdkClientException}: refused, reset, timed out) or a 5xx of the store (500,
   * 503 SlowDown...), after the SDK's own retries.
   */
  static boolean unreachable(Throwable e) {
    Throwable t = e instanceof CompletionException && e.getCause() != null ? e.getCause() : e;
    return t instanceof SdkClientException
        || (t instanceof S3Exception s3 && s3.statusCode() >= 500);
  }

  /**
   * {@code e} as the client's answer: 503 {@code UNAVAILABLE} with {@code Retry-After: 1}. The
   * request may succeed on a retry and nothing was stored or served wrong; a 500 would say the
   * cache has a bug.
   */
  static OciException unavailable(Throwable e) {
    Throwable t = e instanceof CompletionException && e.getCause() != null ? e.getCause() : e;
    String what =
        t instanceof S3Exception s3 ? "answered " + s3.statusCode() : "could not be reached";
    return new OciException(
        OciErrorCode.UNAVAILABLE,
        OciErrorCode.UNAVAILABLE.defaultStatus(),
        "the cache's object store " + what + "; retry",
        null,
        RETRY_AFTER,
        t);
  }

  @Override
  public void close() {
    client.close();
    presigner.close();
  }

  /**
   * One multipart upload. Parts are numbered from 1 in the order they are added; each but the last
   * must hold at least {@link S3StorageProperties#MIN_PART_BYTES}. Not thread-safe: one writer adds
   * parts, in order, then completes or aborts.
   */
  public final class Upload {
    private final String key;
    private final String uploadId;
    private final List<CompletableFuture<CompletedPart>> parts = new ArrayList<>();

    private Upload(String key, String uploadId) {
      this.key = key;
      this.uploadId = uploadId;
    }

    /** The key the object gets when the upload completes. */
    public String key() {
      return key;
    }

    /** The store's id of this upload. */
    public String uploadId() {
      return uploadId;
    }

    /**
     * Uploads the next part from a region of a file, which may still be growing beyond the region
     * (a fill in progress); parts may be in flight together.
     */
    public void addPart(Path file, long position, long length) {
      int number = parts.size() + 1;
      parts.add(
          client
              .uploadPart(
                  b ->
                      b.bucket(bucket)
                          .key(prefix + key)
                          .uploadId(uploadId)
                          .partNumber(number)
                          .contentLength(length),
                  growingFileRegion(file, position, length))
              .thenApply(r -> CompletedPart.builder().partNumber(number).eTag(r.eTag()).build()));
    }

    /**
     * Completes when at most {@code max} of the parts added so far are still being sent (the oldest
     * are waited for); errors when one of those waited for failed. For backpressure: a writer waits
     * on it before adding more.
     */
    public Mono<Void> partsInFlightAtMost(int max) {
      List<CompletableFuture<CompletedPart>> sending =
          parts.stream().filter(p -> !p.isDone()).toList();
      if (sending.size() <= max) {
        return Mono.empty();
      }
      return Mono.fromFuture(
              CompletableFuture.allOf(
                  sending.subList(0, sending.size() - max).toArray(CompletableFuture[]::new)))
          .onErrorMap(S3Objects::unreachable, S3Objects::unavailable);
    }

    /** Makes the object visible under its key once every part is stored. */
    public Mono<Void> complete() {
      List<CompletableFuture<CompletedPart>> all = List.copyOf(parts);
      return Mono.fromFuture(CompletableFuture.allOf(all.toArray(CompletableFuture[]::new)))
          .then(
              Mono.fromFuture(
                  () ->
                      client.completeMultipartUpload(
                          b ->
                              b.bucket(bucket)
                                  .key(prefix + key)
                                  .uploadId(uploadId)
                                  .multipartUpload(
                                      CompletedMultipartUpload.builder()
                                          .parts(all.stream().map(CompletableFuture::join).toList())
                                          .build()))))
          .onErrorMap(S3Objects::unreachable, S3Objects::unavailable)
          .then();
    }

    /**
     * Discards the parts; nothing appears under the key. An upload gone already (404) counts as
     * aborted; other errors of the store are signalled, so the caller can keep its record of the
     * upload for a later abort.
     */
    public Mono<Void> abort() {
      parts.forEach(p -> p.cancel(false));
      return abortUpload(key, uploadId);
    }
  }
}
