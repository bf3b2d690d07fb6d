package io.registrycache.upstream;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import com.google.cloud.tools.jib.api.Credential;
import io.registrycache.oci.RepositoryName;
import io.registrycache.testsupport.TestUpstreams;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Base64;
import java.util.Map;
import java.util.Optional;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

class UpstreamCredentialsTest {

  private static final RepositoryName NAME = RepositoryName.parse("team/app");

  @Test
  void configuredUsernameAndPassword() {
    Upstream upstream =
        TestUpstreams.upstream(
            "u",
            "http://127.0.0.1:5000",
            s -> {
              s.put("username", "robot");
              s.put("password", "pw");
            });
    assertThat(UpstreamCredentials.resolve(upstream, NAME))
        .contains(Credential.from("robot", "pw"));
  }

  @Test
  void passwordFileLosesOneTrailingNewline(@TempDir Path dir) throws Exception {
    Path file = dir.resolve("pw");
    Files.writeString(file, "line-one\r\n");
    Upstream upstream =
        TestUpstreams.upstream(
            "u",
            "http://127.0.0.1:5000",
            s -> {
              s.put("username", "robot");
              s.put("password-file", file);
            });
    assertThat(UpstreamCredentials.resolve(upstream, NAME))
        .contains(Credential.from("robot", "line-one"));
    assertThat(UpstreamCredentials.stripTrailingNewline("a\n\n")).isEqualTo("a\n");
    assertThat(UpstreamCredentials.stripTrailingNewline("a")).isEqualTo("a");
  }

  @Test
  void unreadablePasswordFileNamesTheSettingNotTheSecret(@TempDir Path dir) {
    Upstream upstream =
        TestUpstreams.upstream(
            "u",
            "http://127.0.0.1:5000",
            s -> {
              s.put("username", "robot");
              s.put("password-file", dir.resolve("missing"));
            });
    assertThatThrownBy(() -> UpstreamCredentials.resolve(upstream, NAME))
        .hasMessageContaining("registry-cache.upstreams.u.password-file");
  }

  @Test
  void halfConfiguredCredentialsFailAtStartUp() {
    Upstream noPassword =
        TestUpstreams.upstream("u", "http://127.0.0.1:5000", s -> s.put("username", "robot"));
    assertThatThrownBy(() -> new UpstreamConnection(noPassword))
        .hasMessageContaining("without password");
    Upstream noUser =
        TestUpstreams.upstream("u", "http://127.0.0.1:5000", s -> s.put("password", "pw"));
    assertThatThrownBy(() -> new UpstreamConnection(noUser))
        .hasMessageContaining("without username");
  }

  @Test
  void dockerConfigFromDockerConfigDirectory(@TempDir Path dir) throws Exception {
    String auth =
        Base64.getEncoder().encodeToString("robot:from-config".getBytes(StandardCharsets.UTF_8));
    Files.writeString(
        dir.resolve("config.json"), "{\"auths\":{\"127.0.0.1:5000\":{\"auth\":\"" + auth + "\"}}}");
    Upstream upstream =
        TestUpstreams.upstream(
            "u", "http://127.0.0.1:5000", s -> s.put("docker-config-credentials", true));

    Optional<Credential> credential =
        UpstreamCredentials.resolve(
            upstream, NAME, Map.of("DOCKER_CONFIG", dir.toString(), "HOME", dir.toString()));

    assertThat(credential).contains(Credential.from("robot", "from-config"));
  }

  @Test
  void anonymousWithoutAnySource() {
    Upstream upstream = TestUpstreams.upstream("u", "http://127.0.0.1:5000", s -> {});
    assertThat(UpstreamCredentials.resolve(upstream, NAME, Map.of())).isEmpty();
  }
}
