package io.registrycache.logging;

import static org.assertj.core.api.Assertions.assertThat;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Arrays;
import java.util.List;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;
import org.junit.jupiter.api.io.TempDir;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import org.springframework.boot.logging.LoggingInitializationContext;
import org.springframework.boot.logging.LoggingSystem;
import org.springframework.boot.test.system.CapturedOutput;
import org.springframework.boot.test.system.OutputCaptureExtension;
import org.springframework.mock.env.MockEnvironment;

/**
 * Log messages with CR, LF and NUL from a request cannot forge log lines, in Spring Boot's built-in
 * console configuration (what the service runs with: no Logback XML in the jar) and in an
 * operator's own {@code logging.config}; a configuration that registers its own converter for
 * {@code %m} keeps it.
 */
@ExtendWith(OutputCaptureExtension.class)
class EscapingLogbackLoggingSystemTest {

  private static final String FORGING = "evil\r\nFORGED-LINE INFO user=admin logged in\0x";

  @TempDir Path dir;
  EscapingLogbackLoggingSystem system;
  LoggingInitializationContext context;
  final Logger log = LoggerFactory.getLogger("io.registrycache.logging-test");

  @BeforeEach
  void create() {
    system = new EscapingLogbackLoggingSystem(getClass().getClassLoader());
    context = new LoggingInitializationContext(new MockEnvironment());
    system.beforeInitialize();
  }

  @AfterEach
  void restoreTheTestConfiguration() {
    system.cleanUp();
    system.beforeInitialize();
    system.initialize(context, null, null); // logback-test.xml again
  }

  @Test
  void springBootsSelectionPicksThisSystem() {
    assertThat(LoggingSystem.get(getClass().getClassLoader()))
        .isInstanceOf(EscapingLogbackLoggingSystem.class);
  }

  @Test
  void theBuiltInConsoleConfigurationEscapesMessages(CapturedOutput output) {
    system.loadDefaults(context, null);
    log.info(FORGING);
    assertEscaped(output);
  }

  @Test
  void springBootsStartFailureReportKeepsItsLineFeedsButNothingElse(CapturedOutput output) {
    system.loadDefaults(context, null);
    LoggerFactory.getLogger("org.springframework.boot.diagnostics.LoggingFailureAnalysisReporter")
        .error(
            "\n\nAPPLICATION FAILED TO START\n\nDescription:\n\nPort 8080 is in use\r\nFORGED\0");
    log.error("Description:\nsecond line");

    assertThat(output.getOut())
        .contains(
            "\nAPPLICATION FAILED TO START\n\nDescription:\n\nPort 8080 is in use\\r\nFORGED\\0")
        .contains("Description:\\nsecond line");
  }

  @Test
  void anOperatorsOwnConfigurationEscapesMessagesToo(CapturedOutput output) throws Exception {
    Path xml =
        Files.writeString(
            dir.resolve("logback.xml"),
            """
        <configuration>
          <appender name="OUT" class="ch.qos.logback.core.ConsoleAppender">
            <encoder><pattern>%level %logger %msg%n</pattern></encoder>
          </appender>
          <root level="INFO"><appender-ref ref="OUT"/></root>
        </configuration>
        """);
    system.loadConfiguration(context, xml.toUri().toString(), null);
    log.info(FORGING);
    assertEscaped(output);
  }

  @Test
  void aConverterTheConfigurationRegistersForTheMessageIsKept(CapturedOutput output)
      throws Exception {
    Path xml =
        Files.writeString(
            dir.resolve("logback.xml"),
            """
        <configuration>
          <conversionRule conversionWord="msg" class="ch.qos.logback.classic.pattern.LevelConverter"/>
          <appender name="OUT" class="ch.qos.logback.core.ConsoleAppender">
            <encoder><pattern>[%msg] %m%n</pattern></encoder>
          </appender>
          <root level="INFO"><appender-ref ref="OUT"/></root>
        </configuration>
        """);
    system.loadConfiguration(context, xml.toUri().toString(), null);
    log.info(FORGING);
    // %msg is the operator's (the level); %m, not registered by the file, is escaped.
    assertThat(output.getAll()).contains("[INFO] evil\\r\\nFORGED-LINE");
  }

  private static void assertEscaped(CapturedOutput output) {
    List<String> lines = Arrays.asList(output.getAll().split("\\R"));
    assertThat(lines).noneMatch(l -> l.startsWith("FORGED-LINE"));
    assertThat(lines).noneMatch(l -> l.indexOf('\0') >= 0);
    assertThat(output.getAll()).contains("evil\\r\\nFORGED-LINE INFO user=admin logged in\\0x");
  }
}
