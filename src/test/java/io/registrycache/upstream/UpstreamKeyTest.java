package io.registrycache.upstream;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.registrycache.config.RegistryCacheProperties;
import java.net.URI;
import java.util.Map;
import java.util.Set;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/** An upstream key names folders on disk and metric tags: it validates on construction. */
class UpstreamKeyTest {

  @ParameterizedTest
  @ValueSource(strings = {"local", "corp-mirror", "registry.example.com:5000", "[::1]:5000", "a_b"})
  void configurationKeysAndRegistryHostsAreKeys(String key) {
    assertThat(new UpstreamKey(key).value()).isEqualTo(key);
    assertThat(
            new Upstream(
                    key,
                    "h",
                    URI.create("http://127.0.0.1:9"),
                    Set.of(),
                    false,
                    RegistryCacheProperties.upstream(Map.of()))
                .key())
        .isEqualTo(key);
  }

  @ParameterizedTest
  @ValueSource(strings = {"", ".", "..", "a/b", "../x", "a b", "a\nb", "k%2f"})
  void pathsControlCharactersAndEmptyKeysAreRefused(String key) {
    assertThatThrownBy(() -> new UpstreamKey(key)).isInstanceOf(IllegalArgumentException.class);
    assertThatThrownBy(
            () ->
                new Upstream(
                    key,
                    "h",
                    URI.create("http://127.0.0.1:9"),
                    Set.of(),
                    false,
                    RegistryCacheProperties.upstream(Map.of())))
        .isInstanceOf(IllegalArgumentException.class);
  }

  @Test
  void aKeyLongerThan255CharactersIsRefused() {
    assertThat(new UpstreamKey("k".repeat(255)).value()).hasSize(255);
    assertThatThrownBy(() -> new UpstreamKey("k".repeat(256)))
        .isInstanceOf(IllegalArgumentException.class);
  }
}
