package io.registrycache.api;

import static org.assertj.core.api.Assertions.assertThat;

import ch.qos.logback.classic.Level;
import ch.qos.logback.classic.Logger;
import ch.qos.logback.classic.spi.ILoggingEvent;
import ch.qos.logback.core.read.ListAppender;
import java.net.InetSocketAddress;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.atomic.AtomicLong;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.slf4j.LoggerFactory;

/**
 * A client of an "insecure" registry tries TLS first on every pull (issue 26 point 5): its rejected
 * handshakes log at INFO once per client address per interval, the rest at DEBUG.
 */
class HandshakeLogTest {

  private final AtomicLong nanos = new AtomicLong();
  private final PlainPortTlsGuard.HandshakeLog handshakeLog = new PlainPortTlsGuard.HandshakeLog(nanos::get);
  private final Logger logger = (Logger) LoggerFactory.getLogger(PlainPortTlsGuard.class);
  private final ListAppender<ILoggingEvent> appender = new ListAppender<>();
  private Level level;

  @BeforeEach
  void capture() {
    level = logger.getLevel();
    logger.setLevel(Level.DEBUG);
    appender.start();
    logger.addAppender(appender);
  }

  @AfterEach
  void release() {
    logger.detachAppender(appender);
    logger.setLevel(level);
  }

  private static InetSocketAddress client(String ip, int port) {
    return new InetSocketAddress(ip, port);
  }

  private List<Level> levels() {
    return appender.list.stream().map(ILoggingEvent::getLevel).toList();
  }

  @Test
  void theSecondHandshakeFromAnAddressWithinTheIntervalIsDebug() {
    assertThat(handshakeLog.rejected(client("10.0.0.7", 40001))).isTrue();
    // another connection (another port) of the same client, a minute later
    nanos.addAndGet(Duration.ofMinutes(1).toNanos());
    assertThat(handshakeLog.rejected(client("10.0.0.7", 40002))).isFalse();
    assertThat(handshakeLog.rejected(client("10.0.0.7", 40003))).isFalse();

    assertThat(levels()).containsExactly(Level.INFO, Level.DEBUG, Level.DEBUG);
    assertThat(appender.list.get(0).getFormattedMessage())
        .startsWith("TLS handshake from /10.0.0.7:40001 on the plain HTTP port: answered 400")
        .contains("in the next 10 min at DEBUG");
    assertThat(appender.list.get(1).getFormattedMessage()).startsWith("TLS handshake from /10.0.0.7:40002");
  }

  @Test
  void everyAddressHasItsOwnInfoLine() {
    handshakeLog.rejected(client("10.0.0.7", 40001));
    handshakeLog.rejected(client("10.0.0.8", 40001));
    handshakeLog.rejected(client("10.0.0.7", 40002));
    handshakeLog.rejected(client("10.0.0.8", 40002));

    assertThat(levels()).containsExactly(Level.INFO, Level.INFO, Level.DEBUG, Level.DEBUG);
  }

  @Test
  void afterTheIntervalTheAddressLogsAtInfoAgain() {
    handshakeLog.rejected(client("10.0.0.7", 40001));
    nanos.addAndGet(PlainPortTlsGuard.LOG_INTERVAL.toNanos() - 1);
    handshakeLog.rejected(client("10.0.0.7", 40002));
    nanos.addAndGet(1);
    handshakeLog.rejected(client("10.0.0.7", 40003));

    assertThat(levels()).containsExactly(Level.INFO, Level.DEBUG, Level.INFO);
  }
}
