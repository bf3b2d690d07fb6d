package io.registrycache.management;

import java.io.BufferedInputStream;
import java.io.ByteArrayOutputStream;
import java.io.InputStream;
import java.io.IOException;
import java.net.InetAddress;
import java.net.Socket;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;

/**
 * One HTTP/1.1 request written byte for byte to a loopback port (java.net.http normalises or
 * refuses the request targets these tests are about), and its answer, read by its {@code
 * Content-Length}, its chunks or to the end of the connection. The connection is not asked to
 * close: a server that answers before reading a request body then drains it instead of resetting
 * the connection under the answer.
 */
final class RawHttp {

  /** Status, headers (names in lower case, the last value of each) and body of an answer. */
  record Response(int status, Map<String, String> headers, byte[] body) {

    String bodyText() {
      return new String(body, StandardCharsets.UTF_8);
    }

    String header(String name) {
      return headers.get(name.toLowerCase(Locale.ROOT));
    }

    @Override
    public String toString() {
      String text = bodyText();
      return status + " " + headers + " " + (text.length() > 300 ? text.substring(0, 300) + "..." : text);
    }
  }

  private RawHttp() {}

  /**
   * Sends {@code method target HTTP/1.1} with {@code Host} (unless a header sets its own), {@code headers} (name and value pairs,
   * written as given) and {@code body} (with its {@code Content-Length} when not empty); the target
   * and header bytes as ISO-8859-1. A connection closed before any answer is status 0.
   */
  static Response send(int port, String method, String target, List<String[]> headers, byte[] body) throws IOException {
    StringBuilder head = new StringBuilder().append(method).append(' ').append(target).append(" HTTP/1.1\r\n");
    if (headers.stream().noneMatch(h -> h[0].equalsIgnoreCase("Host"))) {
      head.append("Host: 127.0.0.1:").append(port).append("\r\n");
    }
    for (String[] header : headers) {
      head.append(header[0]).append(": ").append(header[1]).append("\r\n");
    }
    if (body.length > 0) {
      head.append("Content-Length: ").append(body.length).append("\r\n");
    }
    head.append("\r\n");
    try (Socket socket = new Socket(InetAddress.getLoopbackAddress(), port)) {
      socket.setSoTimeout(20_000);
      socket.getOutputStream().write(head.toString().getBytes(StandardCharsets.ISO_8859_1));
      socket.getOutputStream().write(body);
      socket.getOutputStream().flush();
      return read(new BufferedInputStream(socket.getInputStream()), "HEAD".equals(method));
    }
  }

  static Response get(int port, String target, String... headerPairs) throws IOException {
    List<String[]> headers = new ArrayList<>();
    for (int i = 0; i < headerPairs.length; i += 2) {
      headers.add(new String[] {headerPairs[i], headerPairs[i + 1]});
    }
    return send(port, "GET", target, headers, new byte[0]);
  }

  private static Response read(InputStream in, boolean head) throws IOException {
    String statusLine = line(in);
    if (statusLine == null) {
      return new Response(0, Map.of(), new byte[0]);
    }
    String[] status = statusLine.split(" ", 3);
    if (status.length < 2 || !status[0].startsWith("HTTP/1.")) {
      throw new IOException("not an HTTP/1.x status line: " + statusLine);
    }
    Map<String, String> headers = new LinkedHashMap<>();
    for (String line = line(in); line != null && !line.isEmpty(); line = line(in)) {
      int colon = line.indexOf(':');
      if (colon > 0) {
        headers.put(line.substring(0, colon).trim().toLowerCase(Locale.ROOT), line.substring(colon + 1).trim());
      }
    }
    int code = Integer.parseInt(status[1]);
    byte[] body;
    if (head || code == 204 || code == 304) {
      body = new byte[0];
    } else if ("chunked".equalsIgnoreCase(headers.get("transfer-encoding"))) {
      ByteArrayOutputStream out = new ByteArrayOutputStream();
      for (String size = line(in); size != null; size = line(in)) {
        int semicolon = size.indexOf(';');
        int length = Integer.parseInt((semicolon < 0 ? size : size.substring(0, semicolon)).trim(), 16);
        if (length == 0) {
          break;
        }
        out.write(in.readNBytes(length));
        line(in);
      }
      body = out.toByteArray();
    } else if (headers.containsKey("content-length")) {
      body = in.readNBytes(Integer.parseInt(headers.get("content-length")));
    } else {
      body = in.readAllBytes();
    }
    return new Response(code, headers, body);
  }

  /** One line without its CRLF, or null at the end of the stream. */
  private static String line(InputStream in) throws IOException {
    ByteArrayOutputStream out = new ByteArrayOutputStream();
    int b;
    while ((b = in.read()) != -1) {
      if (b == '\n') {
        byte[] bytes = out.toByteArray();
        int length = bytes.length > 0 && bytes[bytes.length - 1] == '\r' ? bytes.length - 1 : bytes.length;
        return new String(bytes, 0, length, StandardCharsets.ISO_8859_1);
      }
      out.write(b);
    }
    return out.size() == 0 ? null : out.toString(StandardCharsets.ISO_8859_1);
  }
}
