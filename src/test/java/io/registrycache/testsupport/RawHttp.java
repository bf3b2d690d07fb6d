package io.registrycache.testsupport;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.net.InetAddress;
import java.net.Socket;
import java.net.SocketException;
import java.nio.charset.StandardCharsets;

/**
 * HTTP/1.1 requests written byte for byte on a socket, for request lines and headers that real
 * clients (java.net.http among them) refuse to send: malformed targets, absolute-form, odd {@code
 * Host} values. The answer is read whole ({@code Connection: close}).
 */
public final class RawHttp {

  private RawHttp() {}

  /** An answer: its status code and the whole text (status line, headers, body). */
  public record Answer(int status, String text) {

    /** The body after the blank line. */
    public String body() {
      int blank = text.indexOf("\r\n\r\n");
      return blank < 0 ? "" : text.substring(blank + 4);
    }

    /** The first value of header {@code name} (case-insensitive), or {@code null}. */
    public String header(String name) {
      for (String line : text.substring(0, Math.max(0, text.indexOf("\r\n\r\n"))).split("\r\n")) {
        int colon = line.indexOf(':');
        if (colon > 0 && line.substring(0, colon).equalsIgnoreCase(name)) {
          return line.substring(colon + 1).strip();
        }
      }
      return null;
    }
  }

  /**
   * Sends {@code method target HTTP/1.1} with {@code headers} (each {@code "Name: value"}, sent as
   * given; no {@code Host} is added) to loopback {@code port}.
   */
  public static Answer send(int port, String method, String target, String... headers) {
    return sendWithBody(port, method, target, "", headers);
  }

  /**
   * As {@link #send(int, String, String, String...)}, then {@code body} (ISO-8859-1, one byte a
   * character; give the {@code Content-Length} among {@code headers} yourself).
   */
  public static Answer sendWithBody(int port, String method, String target, String body, String... headers) {
    StringBuilder request = new StringBuilder(method).append(' ').append(target).append(" HTTP/1.1\r\n");
    for (String header : headers) {
      request.append(header).append("\r\n");
    }
    request.append("Connection: close\r\n\r\n").append(body);
    try (Socket socket = new Socket(InetAddress.getLoopbackAddress(), port)) {
      socket.setSoTimeout(10_000);
      socket.getOutputStream().write(request.toString().getBytes(StandardCharsets.ISO_8859_1));
      String text = new String(socket.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
      int status = text.startsWith("HTTP/1.1 ") && text.length() >= 12 ? Integer.parseInt(text.substring(9, 12)) : -1;
      return new Answer(status, text);
    } catch (SocketException e) {
      return new Answer(-1, "connection closed: " + e.getMessage()); // a server may reset a request it refused
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
  }
}
