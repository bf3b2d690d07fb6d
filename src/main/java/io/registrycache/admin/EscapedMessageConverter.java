package io.registrycache.admin;

import ch.qos.logback.classic.pattern.MessageConverter;
import ch.qos.logback.classic.spi.ILoggingEvent;

/**
 * The log message ({@code %m}, {@code %msg}, {@code %message}) with control characters escaped,
 * so that a request-derived string cannot forge log lines: CR, LF and NUL from a percent-decoded
 * repository name ({@code %0d%0a}, {@code %00}) come out as {@code \r}, {@code \n}, {@code \0},
 * other C0/C1 controls and DEL as {@code \\uXXXX}; tab and printable text are kept. Registered
 * for those conversion words by {@link EscapingLogbackLoggingSystem}, so Spring Boot's patterns
 * stay as they are.
 */
public class EscapedMessageConverter extends MessageConverter {

  @Override
  public String convert(ILoggingEvent event) {
    return escape(super.convert(event));
  }

  /** {@code text} with every control character but tab escaped; {@code null} stays {@code null}. */
  public static String escape(String text) {
    if (text == null) {
      return null;
    }
    int i = 0;
    while (i < text.length() && !needsEscape(text.charAt(i))) {
      i++;
    }
    if (i == text.length()) {
      return text;
    }
    StringBuilder out = new StringBuilder(text.length() + 16).append(text, 0, i);
    for (; i < text.length(); i++) {
      char c = text.charAt(i);
      if (!needsEscape(c)) {
        out.append(c);
      } else if (c == '\r') {
        out.append("\\r");
      } else if (c == '\n') {
        out.append("\\n");
      } else if (c == 0) {
        out.append("\\0");
      } else {
        out.append(String.format("\\u%04x", (int) c));
      }
    }
    return out.toString();
  }

  private static boolean needsEscape(char c) {
    // C0 controls but tab, DEL, C1 controls, and the Unicode line and paragraph separators.
    return (c < 0x20 && c != '\t') || (c >= 0x7f && c <= 0x9f) || c == '\u2028' || c == '\u2029';
  }
}
