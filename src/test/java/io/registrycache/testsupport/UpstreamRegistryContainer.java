package io.registrycache.testsupport;

import static org.awaitility.Awaitility.await;

import com.github.dockerjava.api.DockerClient;
import java.io.IOException;
import java.net.ServerSocket;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Map.Entry;
import java.util.UUID;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.springframework.security.crypto.bcrypt.BCrypt;
import org.testcontainers.containers.ContainerFetchException;
import org.testcontainers.containers.GenericContainer;
import org.testcontainers.containers.wait.strategy.Wait;
import org.testcontainers.images.builder.Transferable;
import org.testcontainers.utility.DockerImageName;

/**
 * The upstream of the cache in tests: a real {@code registry:2} (CNCF distribution 2.8) in a
 * container, published on a fixed free loopback port so that {@link #stopUpstream()} and {@link
 * #startUpstream()} keep its address and data.
 *
 * <p>{@link #requests()} reads the registry's own request log. distribution 2.8 writes one logrus
 * line per finished request, e.g. {@code msg="response completed" ... http.request.method=GET ...
 * http.request.uri="/v2/foo/blobs/sha256:..."} ({@code "response completed with error"} for 4xx;
 * the URI is quoted only when it holds characters such as {@code :}). Call {@link #syncLogs()}
 * before counting, so that every request finished so far is in the log.
 *
 * <p>The image is {@code registry:2}, from the local engine when it is there, else pulled; where no
 * registry can be reached, {@code docker/local-images.sh} builds it from Debian's {@code
 * docker-registry}. The system property {@code registrycache.registry-image} names another image
 * (e.g. {@code -DargLine=-Dregistrycache.registry-image=local/test-registry:2}).
 */
public class UpstreamRegistryContainer extends GenericContainer<UpstreamRegistryContainer> {

  public static final DockerImageName IMAGE =
      DockerImageName.parse(System.getProperty("registrycache.registry-image", "registry:2"))
          .asCompatibleSubstituteFor("registry");
  public static final int PORT = 5000;

  private static final Pattern COMPLETED =
      Pattern.compile(
          "msg=\"response completed(?: with error)?\".*?"
              + "http\\.request\\.method=(\\S+).*?"
              + "http\\.request\\.uri=(\"(?:[^\"\\\\]|\\\\.)*\"|\\S+)");

  private final int hostPort;
  private String username;
  private String password;
  private final HttpClient http =
      HttpClient.newBuilder()
          .version(HttpClient.Version.HTTP_1_1)
          .connectTimeout(Duration.ofSeconds(2))
          .build();

  /** One request the upstream finished: method and path (query string removed). */
  public record Request(String method, String path, String uri) {}

  public UpstreamRegistryContainer() {
    super(IMAGE);
    this.hostPort = freePort();
    addFixedExposedPort(hostPort, PORT);
    addExposedPort(PORT);
    withEnv("REGISTRY_STORAGE_DELETE_ENABLED", "true");
    waitingFor(Wait.forHttp("/v2/").forPort(PORT).forStatusCode(200));
    withStartupTimeout(Duration.ofSeconds(60));
  }

  /**
   * Starts the container; when the image is neither in the local engine nor pullable, fails with a
   * message that says how to make it.
   */
  @Override
  public void start() {
    try {
      super.start();
    } catch (RuntimeException e) {
      for (Throwable c = e; c != null; c = c.getCause()) {
        if (c instanceof ContainerFetchException) {
          throw new IllegalStateException(
              "image "
                  + IMAGE
                  + " is not in the local Docker engine and cannot be"
                  + " pulled: run docker/local-images.sh (builds registry:2 from Debian's"
                  + " docker-registry package)",
              e);
        }
      }
      throw e;
    }
  }

  /** A registry:2 already started; Testcontainers removes it when the JVM exits. */
  public static UpstreamRegistryContainer started() {
    UpstreamRegistryContainer container = new UpstreamRegistryContainer();
    container.start();
    return container;
  }

  /** {@code http://localhost:<port>}. */
  public String baseUrl() {
    return "http://localhost:" + hostPort;
  }

  /** {@code localhost:<port>}. */
  public String hostAndPort() {
    return "localhost:" + hostPort;
  }

  /**
   * Basic authentication (RFC 7617) with one user, from an htpasswd file with a bcrypt entry (as
   * {@code htpasswd -nbB} writes it); {@link #pusher()} then authenticates. Call before {@code
   * start()}.
   */
  public UpstreamRegistryContainer withHtpasswd(String username, String password) {
    this.username = username;
    this.password = password;
    withEnv("REGISTRY_AUTH", "htpasswd");
    withEnv("REGISTRY_AUTH_HTPASSWD_REALM", "registry-cache-test");
    withEnv("REGISTRY_AUTH_HTPASSWD_PATH", "/auth/htpasswd");
    withCopyToContainer(Transferable.of(htpasswdLine(username, password)), "/auth/htpasswd");
    return waitingFor(Wait.forHttp("/v2/").forPort(PORT).forStatusCode(401));
  }

  /**
   * Basic authentication with several users (name → password), from one htpasswd file; {@link
   * #pusher()} pushes as the first. distribution's htpasswd gives every user every repository. Call
   * before {@code start()}.
   */
  public UpstreamRegistryContainer withHtpasswd(Map<String, String> users) {
    Entry<String, String> first = users.entrySet().iterator().next();
    withHtpasswd(first.getKey(), first.getValue());
    StringBuilder lines = new StringBuilder();
    users.forEach((user, pass) -> lines.append(htpasswdLine(user, pass)));
    withCopyToContainer(Transferable.of(lines.toString()), "/auth/htpasswd");
    return this;
  }

  /**
   * Token authentication (distribution's {@code auth.token}): bearer tokens of the issuer whose
   * certificate is {@code rootCertificatePem} ({@link TestTokenServer}), challenges naming {@code
   * realm} and {@code service}. {@link #pusher()} does not authenticate then: push with a token
   * ({@link ImagePusher#withAuthorization}). Call before {@code start()}.
   */
  public UpstreamRegistryContainer withTokenAuth(
      String realm, String service, String issuer, String rootCertificatePem) {
    withEnv("REGISTRY_AUTH", "token");
    withEnv("REGISTRY_AUTH_TOKEN_REALM", realm);
    withEnv("REGISTRY_AUTH_TOKEN_SERVICE", service);
    withEnv("REGISTRY_AUTH_TOKEN_ISSUER", issuer);
    withEnv("REGISTRY_AUTH_TOKEN_ROOTCERTBUNDLE", "/auth/root.pem");
    withCopyToContainer(Transferable.of(rootCertificatePem), "/auth/root.pem");
    return waitingFor(Wait.forHttp("/v2/").forPort(PORT).forStatusCode(401));
  }

  /** A pusher that seeds this registry (with the {@link #withHtpasswd} user, if any). */
  public ImagePusher pusher() {
    return new ImagePusher(baseUrl(), username, password);
  }

  /** Every request the registry has logged as finished, oldest first. */
  public List<Request> requests() {
    List<Request> result = new ArrayList<>();
    for (String line : logs().split("\n")) {
      Matcher m = COMPLETED.matcher(line);
      if (m.find()) {
        String uri = m.group(2);
        if (uri.startsWith("\"")) {
          uri = uri.substring(1, uri.length() - 1).replace("\\\"", "\"").replace("\\\\", "\\");
        }
        int q = uri.indexOf('?');
        result.add(new Request(m.group(1), q < 0 ? uri : uri.substring(0, q), uri));
      }
    }
    return result;
  }

  /** How many finished requests had this method and exactly this path (query ignored). */
  public long countRequests(String method, String path) {
    return requests().stream()
        .filter(r -> r.method().equals(method) && r.path().equals(path))
        .count();
  }

  /** How many finished requests, any method, had a path starting with {@code prefix}. */
  public long countRequestsUnder(String prefix) {
    return requests().stream().filter(r -> r.path().startsWith(prefix)).count();
  }

  /**
   * Sends a marker request and waits until it shows in the log. Requests that finished before this
   * call are then in the log too.
   */
  public void syncLogs() {
    String marker = UUID.randomUUID().toString();
    try {
      http.send(
          HttpRequest.newBuilder(URI.create(baseUrl() + "/v2/?sync=" + marker)).GET().build(),
          HttpResponse.BodyHandlers.discarding());
    } catch (IOException e) {
      throw new IllegalStateException("upstream not reachable for log sync", e);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new IllegalStateException(e);
    }
    await("marker request " + marker + " in the registry's log")
        .atMost(Duration.ofSeconds(15))
        .pollDelay(Duration.ZERO)
        .pollInterval(Duration.ofMillis(50))
        .until(() -> logs().contains(marker));
  }

  /** The container's whole stdout+stderr so far (works while stopped, too). */
  public String logs() {
    return getLogs();
  }

  /** {@code docker stop}: the registry goes away, its container, data and port binding stay. */
  public void stopUpstream() {
    DockerClient docker = getDockerClient();
    docker.stopContainerCmd(getContainerId()).withTimeout(2).exec();
  }

  /** {@code docker start} after {@link #stopUpstream()}; same address, same data. */
  public void startUpstream() {
    getDockerClient().startContainerCmd(getContainerId()).exec();
    int ready = username == null ? 200 : 401;
    await("the registry answering /v2/ again after docker start")
        .atMost(Duration.ofSeconds(30))
        .pollDelay(Duration.ZERO)
        .pollInterval(Duration.ofMillis(100))
        .ignoreExceptionsInstanceOf(IOException.class) // not up yet
        .until(
            () ->
                http.send(
                            HttpRequest.newBuilder(URI.create(baseUrl() + "/v2/")).build(),
                            HttpResponse.BodyHandlers.discarding())
                        .statusCode()
                    == ready);
  }

  /**
   * An htpasswd line {@code user:$2y$05$...}, what {@code htpasswd -nbB} (Apache's default cost 5)
   * writes. distribution checks it with Go's x/crypto/bcrypt, which takes the {@code 2a}, {@code
   * 2b} and {@code 2y} prefixes alike; the low cost keeps each authenticated request cheap.
   */
  static String htpasswdLine(String user, String password) {
    String hash = BCrypt.hashpw(password, BCrypt.gensalt("$2y", 5));
    return user + ":" + hash + "\n";
  }

  private static int freePort() {
    try (ServerSocket socket = new ServerSocket(0)) {
      return socket.getLocalPort();
    } catch (IOException e) {
      throw new IllegalStateException(e);
    }
  }
}
