package io.registrycache.testsupport;

import com.sun.net.httpserver.HttpExchange;
import com.sun.net.httpserver.HttpServer;
import com.sun.net.httpserver.HttpsConfigurator;
import com.sun.net.httpserver.HttpsServer;
import java.io.IOException;
import java.io.OutputStream;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.nio.charset.StandardCharsets;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.Executors;
import java.util.concurrent.atomic.AtomicLong;

/**
 * Scripted loopback HTTP servers (JDK {@link HttpServer}) for upstreams that registry:2 cannot
 * play: answers the tests write by hand. Two ways to use it:
 *
 * <ul>
 *   <li>a bare server ({@link #server}, or {@link #httpsServer} over TLS with a {@link
 *       TestCertificate}) on which a test creates its own contexts, answering with {@link
 *       #respond};
 *   <li>a misbehaving registry ({@code new ScriptedHttp()}): each path gets a {@link Responder}
 *       ({@link #route}), {@code /v2/} answers 200, anything unscripted 404 with an OCI error, and
 *       requests are counted per method and path ({@link #count}).
 * </ul>
 */
public final class ScriptedHttp implements AutoCloseable {

  /** Answers one exchange. */
  @FunctionalInterface
  public interface Responder {
    void respond(HttpExchange exchange) throws IOException;
  }

  private final HttpServer server;
  private final Map<String, Responder> routes = new ConcurrentHashMap<>();
  private final Map<String, AtomicLong> counts = new ConcurrentHashMap<>();

  /** A misbehaving registry on a free loopback port, started; stop it with {@link #close()}. */
  public ScriptedHttp() {
    server = newServer();
    server.createContext("/", this::handle);
  }

  /** A started server on a free loopback port; stopped by closing {@code closeables}. */
  public static HttpServer server(List<AutoCloseable> closeables) {
    HttpServer server = newServer();
    closeables.add(() -> server.stop(0));
    return server;
  }

  /**
   * A started HTTPS server (JDK {@link HttpsServer}) on a free loopback port, presenting {@code
   * certificate}; stopped by closing {@code closeables}.
   */
  public static HttpsServer httpsServer(
      List<AutoCloseable> closeables, TestCertificate certificate) {
    try {
      HttpsServer server = HttpsServer.create(loopback(), 50);
      server.setHttpsConfigurator(new HttpsConfigurator(certificate.serverContext()));
      closeables.add(() -> server.stop(0));
      return started(server);
    } catch (IOException e) {
      throw new IllegalStateException(e);
    }
  }

  private static HttpServer newServer() {
    try {
      return started(HttpServer.create(loopback(), 50));
    } catch (IOException e) {
      throw new IllegalStateException(e);
    }
  }

  private static InetSocketAddress loopback() {
    return new InetSocketAddress(InetAddress.getLoopbackAddress(), 0);
  }

  private static <S extends HttpServer> S started(S server) {
    server.setExecutor(Executors.newCachedThreadPool());
    server.start();
    return server;
  }

  /** {@code http://127.0.0.1:<port>}, or {@code https://} for an {@link HttpsServer}. */
  public static String base(HttpServer server) {
    String scheme = server instanceof HttpsServer ? "https" : "http";
    return scheme + "://127.0.0.1:" + server.getAddress().getPort();
  }

  /** {@code http://127.0.0.1:<port>} of this registry. */
  public String baseUrl() {
    return base(server);
  }

  /** Scripts every request (GET and HEAD alike) for {@code path}. */
  public void route(String path, Responder responder) {
    routes.put(path, responder);
  }

  /** How many requests with this method and path arrived (query ignored). */
  public long count(String method, String path) {
    AtomicLong n = counts.get(method + " " + path);
    return n == null ? 0 : n.get();
  }

  /** GET and HEAD requests for {@code path}. */
  public long count(String path) {
    return count("GET", path) + count("HEAD", path);
  }

  private void handle(HttpExchange exchange) throws IOException {
    String path = exchange.getRequestURI().getPath();
    counts
        .computeIfAbsent(exchange.getRequestMethod() + " " + path, k -> new AtomicLong())
        .incrementAndGet();
    try (exchange) {
      Responder responder = routes.get(path);
      if (responder != null) {
        responder.respond(exchange);
      } else if (path.equals("/v2/") || path.equals("/v2")) {
        send(exchange, 200, "application/json", "{}".getBytes(StandardCharsets.UTF_8), null);
      } else {
        byte[] body =
            "{\"errors\":[{\"code\":\"NAME_UNKNOWN\",\"message\":\"not scripted\"}]}"
                .getBytes(StandardCharsets.UTF_8);
        send(exchange, 404, "application/json", body, null);
      }
    } catch (IOException e) {
      // the scripted responder may cut the connection on purpose
    }
  }

  /** Answers with status, headers and body; a HEAD gets the body's Content-Length and no body. */
  public static void respond(HttpExchange ex, int status, Map<String, String> headers, byte[] body)
      throws IOException {
    headers.forEach((k, v) -> ex.getResponseHeaders().add(k, v));
    if ("HEAD".equals(ex.getRequestMethod())) {
      ex.getResponseHeaders().add("Content-Length", String.valueOf(body.length));
      ex.sendResponseHeaders(status, -1);
    } else {
      ex.sendResponseHeaders(status, body.length == 0 ? -1 : body.length);
      ex.getResponseBody().write(body);
    }
    ex.close();
  }

  /**
   * {@link #respond} as a registry answers: Content-Type, API version, optional
   * Docker-Content-Digest.
   */
  public static void send(
      HttpExchange exchange, int status, String contentType, byte[] body, String digest)
      throws IOException {
    Map<String, String> headers = new LinkedHashMap<>();
    headers.put("Content-Type", contentType);
    headers.put("Docker-Distribution-API-Version", "registry/2.0");
    if (digest != null) {
      headers.put("Docker-Content-Digest", digest);
    }
    respond(exchange, status, headers, body);
  }

  /**
   * Announces {@code body.length} bytes, sends the first {@code sendBytes} of them and then drops
   * the connection.
   */
  public static void sendTruncated(
      HttpExchange exchange, String contentType, byte[] body, int sendBytes, String digest)
      throws IOException {
    if ("HEAD".equals(exchange.getRequestMethod())) {
      send(exchange, 200, contentType, body, digest);
      return;
    }
    exchange.getResponseHeaders().set("Content-Type", contentType);
    if (digest != null) {
      exchange.getResponseHeaders().set("Docker-Content-Digest", digest);
    }
    exchange.sendResponseHeaders(200, body.length);
    OutputStream out = exchange.getResponseBody();
    out.write(body, 0, sendBytes);
    out.flush();
    try {
      Thread.sleep(200);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    }
    // Closing a fixed-length body early makes the JDK server close the connection.
    exchange.close();
  }

  @Override
  public void close() {
    server.stop(0);
  }
}
