package io.registrycache.testsupport;

import com.sun.net.httpserver.HttpExchange;
import com.sun.net.httpserver.HttpServer;
import java.io.IOException;
import java.io.OutputStream;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.nio.charset.StandardCharsets;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.Executors;
import java.util.concurrent.atomic.AtomicLong;

/**
 * A misbehaving registry on loopback (JDK {@link HttpServer}): each path gets a scripted
 * {@link Responder}; {@code /v2/} answers 200 and anything unscripted answers 404 with an OCI error.
 * Counts requests per {@code METHOD path}.
 */
public final class FakeUpstream implements AutoCloseable {

  /** Answers one exchange. */
  @FunctionalInterface
  public interface Responder {
    void respond(HttpExchange exchange) throws IOException;
  }

  private final HttpServer server;
  private final Map<String, Responder> routes = new ConcurrentHashMap<>();
  private final Map<String, AtomicLong> counts = new ConcurrentHashMap<>();

  public FakeUpstream() {
    try {
      server = HttpServer.create(new InetSocketAddress(InetAddress.getLoopbackAddress(), 0), 50);
    } catch (IOException e) {
      throw new IllegalStateException(e);
    }
    server.setExecutor(Executors.newCachedThreadPool());
    server.createContext("/", this::handle);
    server.start();
  }

  public String baseUrl() {
    return "http://127.0.0.1:" + server.getAddress().getPort();
  }

  /** Scripts GET and HEAD of {@code path}. */
  public void route(String path, Responder responder) {
    routes.put(path, responder);
  }

  /** How many requests with this method and path arrived (query ignored). */
  public long count(String method, String path) {
    AtomicLong n = counts.get(method + " " + path);
    return n == null ? 0 : n.get();
  }

  /** Requests of any method for {@code path}. */
  public long count(String path) {
    return count("GET", path) + count("HEAD", path);
  }

  private void handle(HttpExchange exchange) throws IOException {
    String path = exchange.getRequestURI().getPath();
    counts.computeIfAbsent(exchange.getRequestMethod() + " " + path, k -> new AtomicLong()).incrementAndGet();
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

  /** Sends a whole response (empty body for HEAD) with an optional Docker-Content-Digest. */
  public static void send(HttpExchange exchange, int status, String contentType, byte[] body, String digest)
      throws IOException {
    exchange.getResponseHeaders().set("Content-Type", contentType);
    exchange.getResponseHeaders().set("Docker-Distribution-API-Version", "registry/2.0");
    if (digest != null) {
      exchange.getResponseHeaders().set("Docker-Content-Digest", digest);
    }
    if ("HEAD".equals(exchange.getRequestMethod())) {
      exchange.getResponseHeaders().set("Content-Length", Long.toString(body.length));
      exchange.sendResponseHeaders(status, -1);
      return;
    }
    exchange.sendResponseHeaders(status, body.length == 0 ? -1 : body.length);
    try (OutputStream out = exchange.getResponseBody()) {
      out.write(body);
    }
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
