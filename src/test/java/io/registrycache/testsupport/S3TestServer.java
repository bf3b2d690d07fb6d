package io.registrycache.testsupport;

import java.io.IOException;
import java.net.URI;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.function.Supplier;
import java.util.function.UnaryOperator;
import java.util.stream.Collectors;
import org.gaul.s3proxy.auth.AuthenticationType;
import org.gaul.s3proxy.junit.S3ProxyExtension;
import org.junit.jupiter.api.extension.AfterEachCallback;
import org.junit.jupiter.api.extension.BeforeEachCallback;
import org.junit.jupiter.api.extension.ExtensionContext;
import org.springframework.test.context.DynamicPropertyRegistry;
import software.amazon.awssdk.auth.credentials.AwsBasicCredentials;
import software.amazon.awssdk.auth.credentials.StaticCredentialsProvider;
import software.amazon.awssdk.http.crt.AwsCrtAsyncHttpClient;
import software.amazon.awssdk.regions.Region;
import software.amazon.awssdk.services.s3.S3AsyncClient;

/**
 * A real S3-API server in the test JVM (s3proxy, signature v2 or v4 required, loopback HTTP) with
 * one empty bucket, and the settings that reach it: {@link #settings()} for a store the test
 * builds, {@link #storeIn(CacheProperties)} and {@link #addStorageTo(DynamicPropertyRegistry)} for
 * a whole service. Either a fresh server for every test ({@link #eachTest(String)} as a
 * {@code @RegisterExtension} field) or one the test starts and closes itself ({@link
 * #started(String)}).
 */
public final class S3TestServer implements BeforeEachCallback, AfterEachCallback, AutoCloseable {

  public static final String ACCESS_KEY = "test-access";
  public static final String SECRET_KEY = "test-secret";

  private final S3ProxyExtension s3 =
      S3ProxyExtension.builder()
          .withCredentials(AuthenticationType.AWS_V2_OR_V4, ACCESS_KEY, SECRET_KEY)
          .build();
  private final String bucket;

  private S3TestServer(String bucket) {
    this.bucket = bucket;
  }

  /** A server started with an empty {@code bucket} before each test and stopped after it. */
  public static S3TestServer eachTest(String bucket) {
    return new S3TestServer(bucket);
  }

  /** A server started now with an empty {@code bucket}; {@link #close()} stops it. */
  public static S3TestServer started(String bucket) {
    S3TestServer server = new S3TestServer(bucket);
    server.start();
    return server;
  }

  private void start() {
    try {
      s3.beforeEach(null);
    } catch (Exception e) {
      throw new IllegalStateException("cannot start s3proxy", e);
    }
    try (S3AsyncClient admin =
        S3AsyncClient.builder()
            .httpClientBuilder(AwsCrtAsyncHttpClient.builder())
            .region(Region.US_EAST_1)
            .credentialsProvider(
                StaticCredentialsProvider.create(
                    AwsBasicCredentials.create(ACCESS_KEY, SECRET_KEY)))
            .endpointOverride(s3.getUri())
            .forcePathStyle(true)
            .build()) {
      admin.createBucket(b -> b.bucket(bucket)).join();
    }
  }

  @Override
  public void beforeEach(ExtensionContext context) {
    start();
  }

  @Override
  public void afterEach(ExtensionContext context) {
    close();
  }

  @Override
  public void close() {
    s3.afterEach(null);
  }

  public URI uri() {
    return s3.getUri();
  }

  public String bucket() {
    return bucket;
  }

  public String accessKey() {
    return ACCESS_KEY;
  }

  public String secretKey() {
    return SECRET_KEY;
  }

  /**
   * Store settings for the bucket, with the server's credentials (and {@link S3Settings}'
   * defaults).
   */
  public S3Settings settings() {
    return S3Settings.s3(uri(), bucket, ACCESS_KEY, SECRET_KEY);
  }

  /** {@code storage.type=s3} on the bucket, 5 MB parts, the server's credentials. */
  private Map<String, Supplier<String>> storage() {
    Map<String, Supplier<String>> p = new LinkedHashMap<>();
    p.put("registry-cache.storage.type", () -> "s3");
    p.put("registry-cache.storage.s3.endpoint", () -> uri().toString());
    p.put("registry-cache.storage.s3.bucket", () -> bucket);
    p.put("registry-cache.storage.s3.part-size", () -> "5MB");
    p.put("registry-cache.storage.s3.access-key-id", () -> ACCESS_KEY);
    p.put("registry-cache.storage.s3.secret-access-key", () -> SECRET_KEY);
    return p;
  }

  /**
   * {@code cache} stored in the bucket: {@code storage.type=s3}, 5 MB parts, the server's
   * credentials.
   */
  public CacheProperties storeIn(CacheProperties cache) {
    storage().forEach(cache::set);
    return cache;
  }

  /** The same as {@link #storeIn(CacheProperties)}, for a {@code @DynamicPropertySource}. */
  public void addStorageTo(DynamicPropertyRegistry registry) {
    storage().forEach((key, value) -> registry.add(key, value::get));
  }

  /**
   * {@link #startCluster(int, String, String, Supplier, UnaryOperator)} with no settings of the
   * test's own.
   */
  public List<ManualCache> startCluster(int n, String name, String token, Supplier<String> upstream)
      throws IOException {
    return startCluster(n, name, token, upstream, UnaryOperator.identity());
  }

  /**
   * {@code n} replicas of the service in this JVM, one cluster (a static peers list on free
   * loopback ports, {@code token}) stored in the bucket, in front of the upstream at {@code
   * upstream}; each with its own temporary {@code storage.path} named after {@code name} and its
   * index, and {@code more} of the test's own settings.
   */
  public List<ManualCache> startCluster(
      int n,
      String name,
      String token,
      Supplier<String> upstream,
      UnaryOperator<CacheProperties> more)
      throws IOException {
    List<Integer> ports = FreePorts.take(n);
    String peers = ports.stream().map(p -> "127.0.0.1:" + p).collect(Collectors.joining(","));
    List<ManualCache> replicas = new ArrayList<>();
    try {
      for (int i = 0; i < n; i++) {
        Path storage = TestFiles.tempDirectory("registry-cache-" + name + "-" + i + "-");
        replicas.add(
            ManualCache.start(
                storeIn(
                    more.apply(
                        CacheProperties.cache(storage)
                            .localUpstream(upstream)
                            .set("registry-cache.cluster.peers", peers)
                            .set("registry-cache.cluster.peer-port", ports.get(i))
                            .set("registry-cache.cluster.self", "127.0.0.1:" + ports.get(i))
                            .set("registry-cache.cluster.token", token)))));
      }
    } catch (RuntimeException e) {
      replicas.forEach(ManualCache::close); // the ones started: the caller gets none
      throw e;
    }
    return replicas;
  }
}
