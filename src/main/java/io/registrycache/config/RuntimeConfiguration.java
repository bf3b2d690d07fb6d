package io.registrycache.config;

import java.time.Clock;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Configuration;
import reactor.core.scheduler.Scheduler;
import reactor.core.scheduler.Schedulers;

/** Shared runtime pieces: the scheduler for blocking file-system work, the clock. */
@Configuration(proxyBeanMethods = false)
public class RuntimeConfiguration {

  /**
   * Threads for blocking file-system work (reads, writes, renames, fsync). Netty event loops never
   * touch the disk; they hand the work to this scheduler.
   */
  @Bean(destroyMethod = "dispose")
  public Scheduler storageScheduler() {
    return Schedulers.newBoundedElastic(
        Math.max(8, 4 * Runtime.getRuntime().availableProcessors()), 100_000, "storage");
  }

  @Bean
  public Clock clock() {
    return Clock.systemUTC();
  }
}
