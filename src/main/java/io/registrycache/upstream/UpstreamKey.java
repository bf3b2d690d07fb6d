package io.registrycache.upstream;

import java.util.regex.Pattern;

/**
 * The configuration key of an upstream ({@code registry-cache.upstreams.<key>}, or the registry
 * host in any-upstream mode): it names the upstream in metrics, logs, prune patterns and on disk
 * ({@code tags/<key>/}, {@code links/.../<key>/}), so it is validated on construction.
 *
 * @param value 1 to 255 characters of letters, digits, {@code . _ - :} and the brackets of an IPv6
 *     host; not {@code .} or {@code ..}
 */
public record UpstreamKey(String value) {

  private static final Pattern KEY = Pattern.compile("[A-Za-z0-9._:\\[\\]-]{1,255}");

  /**
   * @throws IllegalArgumentException when {@code value} is not a valid key
   */
  public UpstreamKey {
    if (value == null || !KEY.matcher(value).matches() || value.equals(".") || value.equals("..")) {
      throw new IllegalArgumentException(
          "invalid upstream key '"
              + value
              + "': 1-255 letters, digits, '.', '_', '-', ':' (no path)");
    }
  }

  @Override
  public String toString() {
    return value;
  }
}
