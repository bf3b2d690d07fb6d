package io.registrycache.api;

import static org.assertj.core.api.Assertions.assertThat;

import ch.qos.logback.classic.Level;
import ch.qos.logback.classic.Logger;
import ch.qos.logback.classic.spi.ILoggingEvent;
import ch.qos.logback.core.read.ListAppender;
import java.net.InetSocketAddress;
import java.util.List;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.slf4j.LoggerFactory;

/**
 * A client of an "insecure" registry tries TLS first on every pull and then falls back, as it
 * should: its rejected handshakes log at INFO once per client address since the start, every later
 * one at DEBUG, however far apart its pulls are.
 */
class HandshakeLogTest {

  private final PlainPortTlsGuard.HandshakeLog handshakeLog = new PlainPortTlsGuard.HandshakeLog();
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
    // another connection (another port) of the same client
    assertThat(handshakeLog.rejected(client("10.0.0.7", 40002))).isFalse();
    assertThat(handshakeLog.rejected(client("10.0.0.7", 40003))).isFalse();

    assertThat(levels()).containsExactly(Level.INFO, Level.DEBUG, Level.DEBUG);
    assertThat(appender.list.get(0).getFormattedMessage())
        .startsWith("TLS handshake from /10.0.0.7:40001 on the plain HTTP port: answered 400")
        .endsWith(
            "falls back to plain HTTP (skopeo --tls-verify=false, containerd, Docker); later ones from this address at DEBUG");
    assertThat(appender.list.get(1).getFormattedMessage())
        .startsWith("TLS handshake from /10.0.0.7:40002");
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
  void aClientThatPullsEveryHourLogsAtInfoOnlyOnce() {
    for (int pull = 0; pull < 24; pull++) {
      handshakeLog.rejected(client("10.0.0.7", 40001 + pull));
    }

    assertThat(levels()).hasSize(24).first().isEqualTo(Level.INFO);
    assertThat(levels()).filteredOn(Level.INFO::equals).hasSize(1);
  }
}
