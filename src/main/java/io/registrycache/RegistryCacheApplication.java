package io.registrycache;

import io.registrycache.htpasswd.HtpasswdCommand;
import io.registrycache.startup.AotTraining;
import java.io.IOException;
import java.util.Arrays;
import org.springframework.boot.SpringApplication;
import org.springframework.boot.autoconfigure.SpringBootApplication;
import org.springframework.boot.context.properties.ConfigurationPropertiesScan;
import reactor.netty.ReactorNetty;

/**
 * Entry point of registry-cache, a pull-only, pull-through caching OCI registry. With {@code
 * htpasswd} as its first argument it runs that subcommand instead ({@link HtpasswdCommand}: one
 * line of an htpasswd file) and exits, without starting the service. With {@code
 * -Dregistry-cache.aot-training=true} it is the AOT cache's training run ({@link AotTraining}).
 */
@SpringBootApplication
@ConfigurationPropertiesScan
public class RegistryCacheApplication {

  /**
   * Buffers a streamed response may hold, queued and being written: twice this many. Reactor
   * Netty's default (128) lets one client reading a blob from its file hold 256 file reads of
   * direct memory while its socket drains; with this, a response holds at most 32 buffers (2 MiB of
   * a stored blob's 64 KiB reads; a fill's reader holds at most 8 of its 256 KiB buffers, its share
   * of their own budget). A value set on the command line wins.
   */
  static final String SEND_PREFETCH = "16";

  static {
    if (System.getProperty(ReactorNetty.REACTOR_NETTY_SEND_MAX_PREFETCH_SIZE) == null) {
      System.setProperty(ReactorNetty.REACTOR_NETTY_SEND_MAX_PREFETCH_SIZE, SEND_PREFETCH);
    }
  }

  public static void main(String[] args) throws IOException {
    if (args.length > 0 && "htpasswd".equals(args[0])) {
      HtpasswdCommand.main(Arrays.copyOfRange(args, 1, args.length));
      return;
    }
    if (AotTraining.requested()) {
      System.exit(AotTraining.run(RegistryCacheApplication.class));
    }
    SpringApplication.run(RegistryCacheApplication.class, args);
  }
}
