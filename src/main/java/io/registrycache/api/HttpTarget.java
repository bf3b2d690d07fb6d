package io.registrycache.api;

import io.netty.handler.codec.http.QueryStringDecoder;
import io.registrycache.oci.OciErrorCode;
import io.registrycache.oci.OciException;
import java.io.ByteArrayOutputStream;
import java.net.URI;
import java.net.URISyntaxException;
import java.nio.charset.StandardCharsets;
import java.util.List;
import java.util.Map;

/**
 * A registry port request's target and host, parsed once, before any routing, authentication or
 * logging: every later step (the pull route, WebFlux's {@code /v2} routes, the realm of a Bearer
 * challenge) works from this value, never from the raw text again.
 *
 * <p>What a target may be (RFC 9112 section 3.2, RFC 3986), decided here once:
 *
 * <ul>
 *   <li>origin-form ({@code /v2/...}) and absolute-form ({@code http://host:port/v2/...}, whose
 *       authority then replaces {@code Host}, RFC 9112 3.2.2) are accepted; any other form of a
 *       {@code /v2} request is 400 {@code NAME_INVALID}.
 *   <li>Below {@code /v2/}, each path segment is percent-decoded on its own. A malformed escape, an
 *       escaped {@code /}, a {@code ;} (path parameters), a dot segment ({@code .}, {@code ..},
 *       escaped or not), an empty segment (a doubled slash), and any byte outside printable ASCII
 *       (raw or escaped; repository names, tags and digests are ASCII, OCI Distribution Spec
 *       "Pulling manifests") are 400 {@code NAME_INVALID}: no client sends them, and normalising
 *       them would let one path be spelt many ways. The first segment must be {@code v2} as is.
 *   <li>The query is decoded with Netty's {@link QueryStringDecoder}; a malformed escape is 400.
 *   <li>{@code Host} (or the absolute-form authority) must be one {@code host[:port]}: a DNS name
 *       or IPv4 address of RFC 3986 unreserved characters, or a bracketed IPv6 address, and at most
 *       5 port digits. Anything else, or more than one {@code Host}, is 400 {@code NAME_INVALID}
 *       (RFC 9112 3.2: "a Host header field with an invalid field value").
 * </ul>
 *
 * Targets whose first segment is not {@code v2} are not the registry's ({@link #registry()} is
 * false) and are left to WebFlux as they are.
 *
 * @param registry whether the target is below {@code /v2}
 * @param rawPath the path as sent, without scheme, authority and query (for logs)
 * @param path the decoded path below {@code /v2/} (e.g. {@code library/alpine/manifests/latest}),
 *     empty for {@code /v2} and {@code /v2/}
 * @param query the decoded query parameters (empty when none)
 * @param authority the validated {@code host[:port]} the client addressed, or {@code null} when it
 *     sent none
 */
public record HttpTarget(
    boolean registry,
    String rawPath,
    String path,
    Map<String, List<String>> query,
    String authority) {

  static final String MALFORMED =
      "malformed request target: an invalid percent-escape or a character not allowed in a URI";

  private static final HttpTarget NOT_REGISTRY = new HttpTarget(false, "", "", Map.of(), null);

  /**
   * Parses a request's target.
   *
   * @param target the request-target as received (Reactor Netty's {@code uri()})
   * @param hosts the request's {@code Host} values
   * @return the parsed target; {@link #registry()} false for a target outside {@code /v2}
   * @throws OciException 400 {@code NAME_INVALID} for a {@code /v2} target or host this class
   *     refuses
   */
  public static HttpTarget parse(String target, List<String> hosts) {
    String authority = null;
    String rest = target;
    int schemeEnd = schemeEnd(target);
    if (schemeEnd > 0) { // absolute-form
      int start = schemeEnd + 3;
      int end = start;
      while (end < target.length() && "/?#".indexOf(target.charAt(end)) < 0) {
        end++;
      }
      authority = target.substring(start, end);
      rest = end == target.length() ? "/" : target.substring(end);
    }
    int q = rest.indexOf('?');
    String rawPath = q < 0 ? rest : rest.substring(0, q);
    if (!isRegistry(rawPath)) {
      return NOT_REGISTRY;
    }
    for (int i = 0; i < rest.length(); i++) {
      char c = rest.charAt(i);
      if (c <= ' ' || c >= 0x7f || c == '#') {
        throw invalid(MALFORMED);
      }
    }
    try {
      new URI(rest); // RFC 3986's characters only (what WebFlux's adapter builds too)
    } catch (URISyntaxException e) {
      throw invalid(MALFORMED);
    }
    if (!rawPath.equals("/v2") && !rawPath.startsWith("/v2/")) {
      throw invalid("the path must start with /v2/ as written, without escapes or parameters");
    }
    String path = decodePath(rawPath);
    Map<String, List<String>> query = Map.of();
    if (q >= 0) {
      try {
        query =
            new QueryStringDecoder(rest.substring(q + 1), StandardCharsets.UTF_8, false)
                .parameters();
      } catch (IllegalArgumentException e) {
        throw invalid(MALFORMED);
      }
    }
    if (authority == null) {
      if (hosts.size() > 1) {
        throw invalid("more than one Host header");
      }
      authority = hosts.isEmpty() ? null : hosts.get(0);
    }
    if (authority != null && !validAuthority(authority)) {
      throw invalid("the Host is not a host[:port]: '" + authority + "'");
    }
    return new HttpTarget(true, rawPath, path, query, authority);
  }

  /** The first value of query parameter {@code name}, or {@code null}. */
  public String queryParam(String name) {
    List<String> values = query.get(name);
    return values == null || values.isEmpty() ? null : values.get(0);
  }

  /** Whether this is {@code /v2} or {@code /v2/}, the API version check. */
  public boolean base() {
    return path.isEmpty();
  }

  /**
   * The absolute URI the client addressed, for the realm of a Bearer challenge: {@code scheme} and
   * this target's authority, then {@code rawPath}.
   *
   * @throws OciException 400 {@code NAME_INVALID} when the client sent no host
   */
  public URI absoluteUri(String scheme) {
    if (authority == null) {
      throw invalid("a Host header is required (RFC 9112 section 3.2)");
    }
    return URI.create(scheme + "://" + authority + rawPath);
  }

  /** Where {@code ://} follows an {@code http} or {@code https} scheme at the start, else -1. */
  private static int schemeEnd(String target) {
    int colon = target.indexOf("://");
    if (colon == 4 && target.regionMatches(true, 0, "http", 0, 4)) {
      return 4;
    }
    return colon == 5 && target.regionMatches(true, 0, "https", 0, 5) ? 5 : -1;
  }

  /**
   * Whether the first path segment, without parameters and decoded, is {@code v2}: what WebFlux
   * would route to the registry's {@code /v2} routes (it matches decoded paths without parameters).
   */
  private static boolean isRegistry(String rawPath) {
    if (!rawPath.startsWith("/")) {
      return rawPath.isEmpty()
          || !rawPath.startsWith("*"); // authority-form and the like: refused below
    }
    int end = rawPath.indexOf('/', 1);
    String first = end < 0 ? rawPath.substring(1) : rawPath.substring(1, end);
    if (first.equals("v2")) {
      return true;
    }
    int semicolon = first.indexOf(';');
    String bare = semicolon < 0 ? first : first.substring(0, semicolon);
    if (bare.indexOf('%') < 0) {
      return bare.equals("v2");
    }
    try {
      return decodeSegment(bare).equals("v2");
    } catch (OciException e) {
      return bare.startsWith("v2") || bare.startsWith("%76") || bare.startsWith("%56");
    }
  }

  /** The decoded path below {@code /v2/}; see the class comment for what is refused. */
  private static String decodePath(String rawPath) {
    if (rawPath.equals("/v2") || rawPath.equals("/v2/")) {
      return "";
    }
    String below = rawPath.substring("/v2/".length());
    StringBuilder path = new StringBuilder(below.length());
    int start = 0;
    while (true) {
      int slash = below.indexOf('/', start);
      int end = slash < 0 ? below.length() : slash;
      String raw = below.substring(start, end);
      if (raw.isEmpty() && slash >= 0) {
        throw invalid("an empty path segment (a doubled slash) in /v2/" + below);
      }
      if (raw.indexOf(';') >= 0) {
        throw invalid("a ';' (path parameter) is not allowed in a registry path");
      }
      String segment = raw.indexOf('%') < 0 ? raw : decodeSegment(raw);
      if (segment.equals(".") || segment.equals("..")) {
        throw invalid("a dot segment is not allowed in a registry path");
      }
      if (segment.indexOf('/') >= 0) {
        throw invalid("an escaped '/' is not allowed in a registry path: '" + segment + "'");
      }
      for (int i = 0; i < segment.length(); i++) {
        char c = segment.charAt(i);
        if (c <= ' ' || c >= 0x7f) {
          throw invalid("a character outside printable ASCII in '" + segment + "'");
        }
      }
      path.append(segment);
      if (slash < 0) {
        return path.toString();
      }
      path.append('/');
      start = slash + 1;
    }
  }

  /** Percent-decodes one segment (UTF-8; bytes that are not UTF-8 become U+FFFD, refused later). */
  private static String decodeSegment(String raw) {
    ByteArrayOutputStream bytes = new ByteArrayOutputStream(raw.length());
    for (int i = 0; i < raw.length(); i++) {
      char c = raw.charAt(i);
      if (c == '%') {
        int hi = i + 2 < raw.length() ? Character.digit(raw.charAt(i + 1), 16) : -1;
        int lo = hi < 0 ? -1 : Character.digit(raw.charAt(i + 2), 16);
        if (lo < 0) {
          throw invalid(MALFORMED);
        }
        bytes.write(hi * 16 + lo);
        i += 2;
      } else {
        bytes.write(c);
      }
    }
    return bytes.toString(StandardCharsets.UTF_8);
  }

  /**
   * Whether {@code authority} is {@code host[:port]}: a name of RFC 3986 unreserved characters
   * (letters, digits, {@code -._~}) or a bracketed IPv6 address, then at most 5 port digits.
   */
  static boolean validAuthority(String authority) {
    int n = authority.length();
    if (n == 0 || n > 255) {
      return false;
    }
    int i = 0;
    if (authority.charAt(0) == '[') {
      i = 1;
      while (i < n && isHexOrColonOrDot(authority.charAt(i))) {
        i++;
      }
      if (i == 1
          || i == n
          || authority.charAt(i) != ']'
          || !ipv6Literal(authority.substring(0, i + 1))) {
        return false;
      }
      i++;
    } else {
      while (i < n && isUnreserved(authority.charAt(i))) {
        i++;
      }
      if (i == 0) {
        return false;
      }
    }
    if (i == n) {
      return true;
    }
    int digits = n - i - 1;
    if (authority.charAt(i) != ':' || digits < 1 || digits > 5) {
      return false;
    }
    for (int j = i + 1; j < n; j++) {
      if (authority.charAt(j) < '0' || authority.charAt(j) > '9') {
        return false;
      }
    }
    return true;
  }

  /**
   * Whether {@code literal} ({@code [...]}) is an IPv6 address, as java.net.URI parses it (RFC
   * 2732).
   */
  private static boolean ipv6Literal(String literal) {
    try {
      return new URI("http://" + literal + "/").getHost() != null;
    } catch (URISyntaxException e) {
      return false;
    }
  }

  private static boolean isUnreserved(char c) {
    return (c >= 'a' && c <= 'z')
        || (c >= 'A' && c <= 'Z')
        || (c >= '0' && c <= '9')
        || "-._~".indexOf(c) >= 0;
  }

  private static boolean isHexOrColonOrDot(char c) {
    return (c >= '0' && c <= '9')
        || (c >= 'a' && c <= 'f')
        || (c >= 'A' && c <= 'F')
        || c == ':'
        || c == '.';
  }

  private static OciException invalid(String message) {
    return new OciException(OciErrorCode.NAME_INVALID, message);
  }
}
