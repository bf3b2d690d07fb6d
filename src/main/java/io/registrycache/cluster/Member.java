package io.registrycache.cluster;

import java.util.Objects;

/**
 * One replica of a registry-cache cluster, as its peers reach it: a host (name or IP literal, IPv6
 * without brackets) and a TCP port.
 *
 * @param host host name or IP address, never blank
 * @param port TCP port, 1–65535
 */
public record Member(String host, int port) implements Comparable<Member> {

  /**
   * Checks the host and the port; drops the brackets of an IPv6 literal.
   *
   * @throws IllegalArgumentException on a blank host or a port out of range
   */
  public Member {
    Objects.requireNonNull(host, "host");
    if (host.isBlank() || host.chars().anyMatch(Character::isWhitespace)) {
      throw new IllegalArgumentException(
          "member host must be a name or an address: '" + host + "'");
    }
    if (port < 1 || port > 65_535) {
      throw new IllegalArgumentException("member port out of range: " + port);
    }
    if (host.startsWith("[") && host.endsWith("]")) {
      host = host.substring(1, host.length() - 1);
    }
  }

  /**
   * Parses {@code host:port}, {@code [v6]:port}, or a bare host that gets {@code defaultPort}.
   *
   * @throws IllegalArgumentException when the text is not of that form
   */
  public static Member parse(String text, int defaultPort) {
    String t = text.strip();
    if (t.startsWith("[")) {
      int close = t.indexOf(']');
      if (close < 0) {
        throw new IllegalArgumentException("unclosed '[' in member address: '" + text + "'");
      }
      String rest = t.substring(close + 1);
      int port = rest.isEmpty() ? defaultPort : port(rest.substring(1), text);
      if (!rest.isEmpty() && !rest.startsWith(":")) {
        throw new IllegalArgumentException(
            "expected ':port' after ']' in member address: '" + text + "'");
      }
      return new Member(t.substring(1, close), port);
    }
    int colon = t.lastIndexOf(':');
    if (colon < 0 || t.indexOf(':') != colon) { // none, or an IPv6 literal without brackets
      return new Member(t, defaultPort);
    }
    return new Member(t.substring(0, colon), port(t.substring(colon + 1), text));
  }

  private static int port(String digits, String text) {
    try {
      return Integer.parseInt(digits);
    } catch (NumberFormatException e) {
      throw new IllegalArgumentException("member port is not a number in '" + text + "'");
    }
  }

  /** {@code host:port}, with brackets around an IPv6 literal: the member's identity in hashing. */
  public String id() {
    return host.indexOf(':') >= 0 ? "[" + host + "]:" + port : host + ":" + port;
  }

  @Override
  public int compareTo(Member other) {
    return id().compareTo(other.id());
  }

  @Override
  public String toString() {
    return id();
  }
}
