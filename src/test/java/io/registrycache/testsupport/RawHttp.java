package io.registrycache.testsupport;

import java.io.BufferedInputStream;
import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.InputStream;
import java.io.UncheckedIOException;
import java.net.InetAddress;
import java.net.Socket;
import java.net.SocketException;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;

/**
 * One HTTP/1.1 request written byte for byte to a loopback port, for request lines and headers that
 * real clients (java.net.http among them) normalise or refuse to send: malformed targets,
 * absolute-form, path forms, odd or missing {@code Host} values. The answer is read by its {@code
 * Content-Length}, its chunks or to the end of the connection. The connection is not asked to
 * close: a server that answers before reading a request body then drains it instead of resetting
 * the connection under the answer.
 */
public final class RawHttp {

  private RawHttp() {}

  /**
   * An answer: its status (0 when the connection closed before any answer, as a server may do with
   * a request it refuses), its headers (names in lower case, the last value of each) and its body.
   */
  public record Response(int status, Map<String, String> headers, byte[] body) {

    /** The body as UTF-8. */
    public String bodyText() {
      return new String(body, StandardCharsets.UTF_8);
    }

    /** The value of header {@code name} (case-insensitive), or {@code null}. */
    public String header(String name) {
      return headers.get(name.toLowerCase(Locale.ROOT));
    }

    @Override
    public String toString() {
      String text = bodyText();
      return status
          + " "
          + headers
          + " "
          + (text.length() > 300 ? text.substring(0, 300) + "..." : text);
    }
  }

  /** {@code Host: 127.0.0.1:<port>}, the header a client of loopback {@code port} sends. */
  public static String host(int port) {
    return "Host: 127.0.0.1:" + port;
  }

  /**
   * Sends {@code GET target HTTP/1.1} to loopback {@code port} with {@code headers} (each {@code
   * "Name: value"}) and {@link #host(int)} unless {@code headers} hold a {@code Host} of their own.
   */
  public static Response get(int port, String target, String... headers) {
    List<String> all = new ArrayList<>(Arrays.asList(headers));
    if (all.stream().noneMatch(h -> h.regionMatches(true, 0, "Host:", 0, 5))) {
      all.add(0, host(port));
    }
    return send(port, "GET", target, all, new byte[0]);
  }

  /**
   * Sends {@code method target HTTP/1.1} with {@code headers} (each {@code "Name: value"}) and no
   * body to loopback {@code port}. Nothing is added: no {@code Host} unless among {@code headers}.
   */
  public static Response send(int port, String method, String target, String... headers) {
    return send(port, method, target, List.of(headers), new byte[0]);
  }

  /**
   * Sends {@code method target HTTP/1.1}, {@code headers} (each {@code "Name: value"}) and then
   * {@code body} to loopback {@code port}, all written as given: no {@code Host} and no {@code
   * Content-Length} is added. The request line and headers are written as ISO-8859-1.
   */
  public static Response send(
      int port, String method, String target, List<String> headers, byte[] body) {
    StringBuilder head =
        new StringBuilder(method).append(' ').append(target).append(" HTTP/1.1\r\n");
    for (String header : headers) {
      head.append(header).append("\r\n");
    }
    head.append("\r\n");
    try (Socket socket = new Socket(InetAddress.getLoopbackAddress(), port)) {
      socket.setSoTimeout(20_000);
      socket.getOutputStream().write(head.toString().getBytes(StandardCharsets.ISO_8859_1));
      socket.getOutputStream().write(body);
      socket.getOutputStream().flush();
      return read(new BufferedInputStream(socket.getInputStream()), "HEAD".equals(method));
    } catch (SocketException e) {
      return new Response(
          0, Map.of(), ("connection closed: " + e.getMessage()).getBytes(StandardCharsets.UTF_8));
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
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
        headers.put(
            line.substring(0, colon).trim().toLowerCase(Locale.ROOT),
            line.substring(colon + 1).trim());
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
        int length =
            Integer.parseInt((semicolon < 0 ? size : size.substring(0, semicolon)).trim(), 16);
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
        int length =
            bytes.length > 0 && bytes[bytes.length - 1] == '\r' ? bytes.length - 1 : bytes.length;
        return new String(bytes, 0, length, StandardCharsets.ISO_8859_1);
      }
      out.write(b);
    }
    return out.size() == 0 ? null : out.toString(StandardCharsets.ISO_8859_1);
  }
}
