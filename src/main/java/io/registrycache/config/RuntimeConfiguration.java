package io.registrycache.config;

import java.time.Clock;
import org.springframework.beans.factory.config.BeanPostProcessor;
import org.springframework.boot.autoconfigure.condition.ConditionalOnMissingBean;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Configuration;
import org.springframework.http.client.ReactorResourceFactory;
import reactor.core.scheduler.Scheduler;
import reactor.core.scheduler.Schedulers;
import reactor.netty.resources.LoopResources;

/**
 * Shared runtime pieces: the scheduler for blocking file-system work, the clock, and the HTTP
 * servers' event loops.
 */
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
  @ConditionalOnMissingBean(Clock.class)
  public Clock clock() {
    return Clock.systemUTC();
  }

  /**
   * The HTTP servers (pull and management ports) run on event loops that belong to this Spring
   * context ({@code reactor-http-*} threads, Reactor Netty's default count: one per core, at least
   * four), not on Reactor Netty's JVM-wide {@code HttpResources}. A production JVM holds one
   * context, so this changes nothing there; but closing a context with the JVM-wide resources
   * disposes them under every other context in the same JVM, so tests could not share a JVM
   * (docs/testing.md). The context disposes its loops when it closes (quiet period {@code
   * spring.reactor.netty.shutdown-quiet-period}, 2 s by default).
   */
  @Bean
  public static BeanPostProcessor ownServerLoops() {
    return new BeanPostProcessor() {
      @Override
      public Object postProcessBeforeInitialization(Object bean, String beanName) {
        if (bean instanceof ReactorResourceFactory factory) {
          factory.setUseGlobalResources(false);
          factory.setLoopResourcesSupplier(() -> LoopResources.create("reactor-http"));
        }
        return bean;
      }
    };
  }
}
