package io.registrycache.upstream;

import com.sun.net.httpserver.HttpExchange;
import com.sun.net.httpserver.HttpServer;
import java.io.IOException;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.util.List;
import java.util.Map;
import java.util.concurrent.Executors;

/** Scripted loopback HTTP servers for upstream tests: answers the tests write by hand. */
final class ScriptedHttp {

  private ScriptedHttp() {}

  /** A started server on a free loopback port; stopped by closing {@code closeables}. */
  static HttpServer server(List<AutoCloseable> closeables) {
    try {
      HttpServer server = HttpServer.create(new InetSocketAddress(InetAddress.getLoopbackAddress(), 0), 50);
      server.setExecutor(Executors.newCachedThreadPool());
      server.start();
      closeables.add(() -> server.stop(0));
      return server;
    } catch (IOException e) {
      throw new IllegalStateException(e);
    }
  }

  /** {@code http://127.0.0.1:<port>}. */
  static String base(HttpServer server) {
    return "http://127.0.0.1:" + server.getAddress().getPort();
  }

  /** Answers with status, headers and body; a HEAD gets the body's Content-Length and no body. */
  static void respond(HttpExchange ex, int status, Map<String, String> headers, byte[] body)
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
}
