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
   * Threads for blocking file-system work (reads, writes, renames, fsync). Event loops make only
   * short file-system calls (opening a stored blob, creating a fill's temporary file) and hand
   * everything longer to this scheduler (docs/architecture.md, "Threading model").
   */
  @Bean(destroyMethod = "dispose")
  public Scheduler storageScheduler() {
    return Schedulers.newBoundedElastic(
        Math.max(8, 4 * Runtime.getRuntime().availableProcessors()), 100_000, "storage");
  }

  /** The system clock in UTC; a test may register a clock of its own before the context starts. */
  @Bean
  @org.springframework.boot.autoconfigure.condition.ConditionalOnMissingBean(Clock.class)
  public Clock clock() {
    return Clock.systemUTC();
  }
}
