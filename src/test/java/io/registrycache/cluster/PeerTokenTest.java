package io.registrycache.cluster;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * The replicas' shared token: required with a cluster, from the property or a file, compared
 * safely.
 */
class PeerTokenTest {

  static final String TOKEN = "peer-token-0123456789abcdef";

  static ClusterProperties cluster(String token, Path file) {
    return new ClusterProperties(
        List.of("a.test", "b.test"),
        null,
        8082,
        Duration.ofSeconds(10),
        null,
        token,
        file,
        Duration.ofSeconds(2),
        Duration.ofSeconds(60),
        Duration.ofSeconds(10),
        null);
  }

  @Test
  void theRightBearerTokenIsAcceptedAndNothingElse() {
    PeerToken token = new PeerToken(cluster(TOKEN, null));
    assertThat(token.authorization()).isEqualTo("Bearer " + TOKEN);
    assertThat(token.accepts("Bearer " + TOKEN)).isTrue();
    assertThat(token.accepts("bearer " + TOKEN))
        .as("the scheme is case-insensitive (RFC 9110 11.1)")
        .isTrue();
    assertThat(token.accepts(null)).isFalse();
    assertThat(token.accepts("")).isFalse();
    assertThat(token.accepts("Bearer")).isFalse();
    assertThat(token.accepts("Bearer ")).isFalse();
    assertThat(token.accepts(TOKEN)).as("no scheme").isFalse();
    assertThat(token.accepts("Basic " + TOKEN)).isFalse();
    assertThat(token.accepts("Bearer " + TOKEN + "x")).isFalse();
    assertThat(token.accepts("Bearer " + TOKEN.substring(1))).isFalse();
    assertThat(token.accepts("Bearer " + TOKEN.toUpperCase())).isFalse();
    assertThat(token.toString()).doesNotContain(TOKEN);
  }

  @Test
  void theTokenComesFromAFileWithoutItsLineEnd(@TempDir Path dir) throws IOException {
    Path file = dir.resolve("token");
    Files.writeString(file, TOKEN + "\n");
    PeerToken token = new PeerToken(cluster(null, file));
    assertThat(token.accepts("Bearer " + TOKEN)).isTrue();
  }

  @Test
  void aClusterWithoutAUsableTokenDoesNotStart(@TempDir Path dir) {
    assertThatThrownBy(() -> new PeerToken(cluster(null, null)))
        .hasMessageContaining("exactly one of token and token-file");
    assertThatThrownBy(() -> new PeerToken(cluster(TOKEN, dir.resolve("t"))))
        .hasMessageContaining("exactly one");
    assertThatThrownBy(() -> new PeerToken(cluster(null, dir.resolve("missing"))))
        .hasMessageContaining("cannot be read");
    assertThatThrownBy(() -> new PeerToken(cluster("short", null)))
        .hasMessageContaining("at least 16")
        .hasMessageNotContaining("short");
    assertThatThrownBy(() -> new PeerToken(cluster("has a space in the middle", null)))
        .hasMessageContaining("without spaces");
  }

  @Test
  void aSingleReplicaNeedsNoTokenAndAcceptsNone() {
    PeerToken token =
        new PeerToken(new ClusterProperties(List.of(), null, 8082, Duration.ofSeconds(10), null));
    assertThat(token.present()).isFalse();
    assertThat(token.accepts("Bearer anything-at-all-here")).isFalse();
    assertThatThrownBy(token::authorization).isInstanceOf(IllegalStateException.class);
  }
}
