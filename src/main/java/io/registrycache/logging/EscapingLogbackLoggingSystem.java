package io.registrycache.logging;

import ch.qos.logback.classic.Logger;
import ch.qos.logback.classic.LoggerContext;
import ch.qos.logback.classic.encoder.PatternLayoutEncoder;
import ch.qos.logback.classic.spi.ILoggingEvent;
import ch.qos.logback.core.Appender;
import ch.qos.logback.core.CoreConstants;
import ch.qos.logback.core.OutputStreamAppender;
import ch.qos.logback.core.pattern.DynamicConverter;
import java.util.HashMap;
import java.util.Iterator;
import java.util.List;
import java.util.Map;
import java.util.function.Supplier;
import org.slf4j.LoggerFactory;
import org.springframework.boot.logging.LogFile;
import org.springframework.boot.logging.LoggingInitializationContext;
import org.springframework.boot.logging.LoggingSystem;
import org.springframework.boot.logging.LoggingSystemFactory;
import org.springframework.boot.logging.logback.LogbackLoggingSystem;
import org.springframework.core.Ordered;
import org.springframework.core.annotation.Order;
import org.springframework.util.ClassUtils;

/**
 * Spring Boot's Logback logging system, with the log message ({@code %m}, {@code %msg}, {@code
 * %message}) written by {@link EscapedMessageConverter} in every pattern of every configuration:
 * Spring Boot's built-in console configuration (what the service ships with) and a {@code
 * logging.config} file of the operator's own, unless that file registers a converter of its own for
 * one of those words. So a request-derived string cannot forge log lines (docs/security.md).
 *
 * <p>Why not a {@code logback-spring.xml} that registers the converter: reading any Logback XML
 * loads Joran (~0.3 s of start-up and ~7 MiB, docs/performance.md); Spring Boot's built-in
 * configuration is built in code. Registered in {@code META-INF/spring.factories} ahead of Spring
 * Boot's own factory.
 */
public class EscapingLogbackLoggingSystem extends LogbackLoggingSystem {

  private static final List<String> MESSAGE_WORDS = List.of("m", "msg", "message");

  public EscapingLogbackLoggingSystem(ClassLoader classLoader) {
    super(classLoader);
  }

  @Override
  protected void loadDefaults(LoggingInitializationContext initializationContext, LogFile logFile) {
    super.loadDefaults(initializationContext, logFile);
    escapeMessages((LoggerContext) LoggerFactory.getILoggerFactory());
  }

  @Override
  protected void loadConfiguration(
      LoggingInitializationContext initializationContext, String location, LogFile logFile) {
    super.loadConfiguration(initializationContext, location, logFile);
    escapeMessages((LoggerContext) LoggerFactory.getILoggerFactory());
  }

  /**
   * Registers {@link EscapedMessageConverter} for the message words the configuration left to
   * Logback's default, then restarts the pattern encoders of the appenders attached to loggers so
   * their patterns are compiled again with it.
   */
  static void escapeMessages(LoggerContext context) {
    @SuppressWarnings("unchecked")
    Map<String, Supplier<DynamicConverter<?>>> rules =
        (Map<String, Supplier<DynamicConverter<?>>>)
            context.getObject(CoreConstants.PATTERN_RULE_REGISTRY_FOR_SUPPLIERS);
    if (rules == null) {
      rules = new HashMap<>();
      context.putObject(CoreConstants.PATTERN_RULE_REGISTRY_FOR_SUPPLIERS, rules);
    }
    @SuppressWarnings("unchecked")
    Map<String, String> legacyRules =
        (Map<String, String>) context.getObject(CoreConstants.PATTERN_RULE_REGISTRY);
    for (String word : MESSAGE_WORDS) {
      if (legacyRules == null || !legacyRules.containsKey(word)) {
        rules.putIfAbsent(word, EscapedMessageConverter::new);
      }
    }
    for (Logger logger : context.getLoggerList()) {
      for (Iterator<Appender<ILoggingEvent>> it = logger.iteratorForAppenders(); it.hasNext(); ) {
        if (it.next() instanceof OutputStreamAppender<ILoggingEvent> appender
            && appender.getEncoder() instanceof PatternLayoutEncoder encoder
            && encoder.isStarted()) {
          encoder.stop();
          encoder.start();
        }
      }
    }
  }

  /** Picked by Spring Boot before its own Logback factory ({@code HIGHEST_PRECEDENCE + 1024}). */
  @Order(Ordered.HIGHEST_PRECEDENCE)
  public static class Factory implements LoggingSystemFactory {

    private static final boolean PRESENT =
        ClassUtils.isPresent(
            "ch.qos.logback.classic.LoggerContext", Factory.class.getClassLoader());

    @Override
    public LoggingSystem getLoggingSystem(ClassLoader classLoader) {
      return PRESENT ? new EscapingLogbackLoggingSystem(classLoader) : null;
    }
  }
}
