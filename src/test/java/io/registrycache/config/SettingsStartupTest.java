package io.registrycache.config;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.catchThrowable;

import io.registrycache.RegistryCacheApplication;
import java.io.IOException;
import java.net.InetSocketAddress;
import java.net.ServerSocket;
import java.nio.file.Path;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;
import org.junit.jupiter.api.io.TempDir;
import org.springframework.boot.builder.SpringApplicationBuilder;
import org.springframework.boot.test.system.CapturedOutput;
import org.springframework.boot.test.system.OutputCaptureExtension;

/**
 * The service started in-process with a wrong setting stops before anything starts (no start-up
 * warm-up, no port), and Spring Boot's report carries the analysis on real lines: one of
 * description, one of action.
 */
@ExtendWith(OutputCaptureExtension.class)
class SettingsStartupTest {

  @TempDir Path storage;

  private Throwable start(String... settings) {
    String[] args = new String[settings.length + 3];
    args[0] = "--registry-cache.storage.path=" + storage;
    args[1] = "--management.server.port=0";
    args[2] = "--registry-cache.admin.warm-up-pulls=1";
    System.arraycopy(settings, 0, args, 3, settings.length);
    return catchThrowable(
        () -> new SpringApplicationBuilder(RegistryCacheApplication.class).run(args).close());
  }

  @Test
  void aPortInUseStopsTheStartBeforeTheWarmUp(CapturedOutput output) throws IOException {
    try (ServerSocket taken = new ServerSocket()) {
      taken.bind(new InetSocketAddress(0));
      int port = taken.getLocalPort();

      Throwable failure = start("--server.port=" + port);

      assertThat(failure).isInstanceOf(SettingFailures.ListenPortException.class);
      assertThat(output.getOut())
          .contains(
              "APPLICATION FAILED TO START\n***************************\n\nDescription:\n\n"
                  + "Port "
                  + port
                  + " (server.port) is already in use.\n\nAction:\n\n"
                  + "Stop the process that listens on port "
                  + port
                  + ", or set server.port to a free port")
          .doesNotContain("start-up warm-up")
          .doesNotContain("\tat ");
    }
  }

  @Test
  void anUpstreamUrlThatIsNotAUrl(CapturedOutput output) {
    Throwable failure = start("--server.port=0", "--registry-cache.upstreams.x.url=notaurl");

    assertThat(failure).isInstanceOf(SettingFailures.UpstreamUrlException.class);
    assertThat(output.getOut())
        .contains(
            "Description:\n\nregistry-cache.upstreams.x.url is 'notaurl', which is not an http or https URL with a host.\n\n"
                + "Action:\n\nSet registry-cache.upstreams.x.url to the registry's base URL")
        .doesNotContain("start-up warm-up")
        .doesNotContain("\tat ");
  }
}
