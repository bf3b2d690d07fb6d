package io.registrycache.testsupport;

import io.registrycache.RegistryCacheApplication;
import io.registrycache.proxy.ProxyBlobService;
import java.time.Clock;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import org.awaitility.Awaitility;
import org.springframework.boot.builder.SpringApplicationBuilder;
import org.springframework.context.ApplicationContext;
import org.springframework.context.ConfigurableApplicationContext;

/**
 * The service started and stopped by the test itself (a restart is a new context on the same
 * storage), on random ports. Closing it leaves other contexts in the JVM running: each context's
 * servers have event loops of their own (config.RuntimeConfiguration).
 */
public final class ManualCache implements AutoCloseable {

  private final ConfigurableApplicationContext context;

  private ManualCache(ConfigurableApplicationContext context) {
    this.context = context;
  }

  /** Starts the service with {@code properties} on a random registry port. */
  public static ManualCache start(CacheProperties properties) {
    List<String> args = new ArrayList<>(List.of("--server.port=0"));
    args.addAll(properties.asArguments());
    return new ManualCache(
        new SpringApplicationBuilder(RegistryCacheApplication.class)
            .run(args.toArray(String[]::new)));
  }

  /**
   * Starts the service with {@code properties} and {@code clock} as its clock: time-based behaviour
   * (tag TTLs, last-pulled times) moves when the test moves the clock.
   */
  public static ManualCache start(CacheProperties properties, Clock clock) {
    List<String> args = new ArrayList<>(List.of("--server.port=0"));
    args.addAll(properties.asArguments());
    return new ManualCache(
        new SpringApplicationBuilder(RegistryCacheApplication.class)
            .initializers(context -> context.getBeanFactory().registerSingleton("testClock", clock))
            .run(args.toArray(String[]::new)));
  }

  public CacheClient client() {
    return CacheClient.onPort(
        Integer.parseInt(context.getEnvironment().getRequiredProperty("local.server.port")));
  }

  public ConfigurableApplicationContext context() {
    return context;
  }

  /**
   * Waits until every blob download in flight has committed (or failed); see {@link
   * #awaitDownloadsCommitted(org.springframework.context.ApplicationContext)}.
   */
  public void awaitDownloadsCommitted() {
    awaitDownloadsCommitted(context);
  }

  /**
   * Waits (up to 30 s) until the service in {@code context} has no blob download in flight. A
   * client gets a blob's last byte once it is verified, before the store's commit (fsync and
   * rename, or upload): a test that looks at the store right after a pull waits for this first.
   */
  public static void awaitDownloadsCommitted(ApplicationContext context) {
    ProxyBlobService blobs = context.getBean(ProxyBlobService.class);
    Awaitility.await("blob downloads in flight to commit")
        .atMost(Duration.ofSeconds(30))
        .until(() -> blobs.downloadsInFlight() == 0);
  }

  @Override
  public void close() {
    context.close();
  }
}
