package io.registrycache.logging;

import ch.qos.logback.classic.pattern.MessageConverter;
import ch.qos.logback.classic.spi.ILoggingEvent;
import java.util.Set;

/**
 * The log message ({@code %m}, {@code %msg}, {@code %message}) with control characters escaped, so
 * that a request-derived string cannot forge log lines: CR, LF and NUL from a percent-decoded
 * repository name ({@code %0d%0a}, {@code %00}) come out as {@code \r}, {@code \n}, {@code \0},
 * other C0/C1 controls and DEL as {@code \\uXXXX}; tab and printable text are kept. Registered for
 * those conversion words by {@link EscapingLogbackLoggingSystem}, so Spring Boot's patterns stay as
 * they are.
 */
public class EscapedMessageConverter extends MessageConverter {

  /**
   * Loggers whose messages keep their line feeds: Spring Boot's "APPLICATION FAILED TO START"
   * report and its pointer to the condition report, fixed text laid out on several lines and
   * written while the service starts, before any request exists.
   */
  static final Set<String> MULTI_LINE_LOGGERS =
      Set.of(
          "org.springframework.boot.diagnostics.LoggingFailureAnalysisReporter",
          "org.springframework.boot.autoconfigure.logging.ConditionEvaluationReportLogger");

  @Override
  public String convert(ILoggingEvent event) {
    return escape(super.convert(event), MULTI_LINE_LOGGERS.contains(event.getLoggerName()));
  }

  /** {@code text} with every control character but tab escaped; {@code null} stays {@code null}. */
  public static String escape(String text) {
    return escape(text, false);
  }

  /**
   * {@code text} with every control character but tab (and LF, when {@code keepLineFeeds}) escaped.
   */
  static String escape(String text, boolean keepLineFeeds) {
    if (text == null) {
      return null;
    }
    int i = 0;
    while (i < text.length() && !needsEscape(text.charAt(i), keepLineFeeds)) {
      i++;
    }
    if (i == text.length()) {
      return text;
    }
    StringBuilder out = new StringBuilder(text.length() + 16).append(text, 0, i);
    for (; i < text.length(); i++) {
      char c = text.charAt(i);
      if (!needsEscape(c, keepLineFeeds)) {
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

  private static boolean needsEscape(char c, boolean keepLineFeeds) {
    // C0 controls but tab, DEL, C1 controls, and the Unicode line and paragraph separators.
    return (c < 0x20 && c != '\t' && !(keepLineFeeds && c == '\n'))
        || (c >= 0x7f && c <= 0x9f)
        || c == '\u2028'
        || c == '\u2029';
  }
}
