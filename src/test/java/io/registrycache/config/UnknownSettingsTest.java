package io.registrycache.config;

import static org.assertj.core.api.Assertions.assertThat;

import ch.qos.logback.classic.Logger;
import ch.qos.logback.classic.spi.ILoggingEvent;
import ch.qos.logback.core.read.ListAppender;
import io.registrycache.cluster.ClusterProperties;
import io.registrycache.storage.s3.S3StorageProperties;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.slf4j.LoggerFactory;
import org.springframework.boot.context.properties.EnableConfigurationProperties;
import org.springframework.boot.test.context.runner.ApplicationContextRunner;
import org.springframework.core.env.StandardEnvironment;
import org.springframework.core.env.SystemEnvironmentPropertySource;

/**
 * A {@code registry-cache.*} key that no setting takes gets one warning naming it at start; keys
 * every form of binding uses (nested records, maps, indexed and comma-separated lists, environment
 * variables) get none.
 */
class UnknownSettingsTest {

  private final Logger logger = (Logger) LoggerFactory.getLogger(UnknownSettings.class);
  private final ListAppender<ILoggingEvent> appender = new ListAppender<>();

  @BeforeEach
  void capture() {
    appender.start();
    logger.addAppender(appender);
  }

  @AfterEach
  void release() {
    logger.detachAppender(appender);
  }

  private List<String> warnings() {
    return appender.list.stream().map(ILoggingEvent::getFormattedMessage).toList();
  }

  /**
   * The settings records of other packages, which the application's @ConfigurationPropertiesScan
   * finds.
   */
  @EnableConfigurationProperties({ClusterProperties.class, S3StorageProperties.class})
  static class OtherPackagesSettings {}

  @Test
  void misspeltKeysAreWarnedAboutOnceEachAndKnownOnesNot() {
    new ApplicationContextRunner()
        .withUserConfiguration(
            PropertiesConfiguration.class, OtherPackagesSettings.class, UnknownSettings.class)
        .withInitializer(
            context ->
                context
                    .getEnvironment()
                    .getPropertySources()
                    .addFirst(
                        new SystemEnvironmentPropertySource(
                            StandardEnvironment.SYSTEM_ENVIRONMENT_PROPERTY_SOURCE_NAME,
                            Map.of(
                                "REGISTRYCACHE_UPSTREAMS_LOCAL_ALIASES_0", "mirror.example.com",
                                "REGISTRYCACHE_AUTH_GROUPS_DEVS", "user:alice,robot:ci",
                                "REGISTRYCACHE_STORAGE_MAXBYTES", "10737418240",
                                "REGISTRYCACHE_UPSTREAMS_LOCAL_RETRY_MAXATTEMPS", "2"))))
        .withPropertyValues(
            "registry-cache.uptreams.x.url=https://registry.example.com",
            "registry-cache.upstreams.hub.url=https://registry.example.com",
            "registry-cache.upstreams.hub.tls.insecure-skip-verify=true",
            "registry-cache.upstreams.hub.tls.insecure=true",
            "registry-cache.upstreams.hub.redirect.allowed-hosts=10.0.0.0/8,cdn.example.com",
            "registry-cache.upstreams.hub.pull-through.deny[0]=team/secret/**",
            "registry-cache.auth.rules[0].subjects[0]=anonymous",
            "registry-cache.auth.rules[0].repositories=library/*",
            "registry-cache.auth.rules[0].upstream=hub",
            "registry-cache.default-upstream=hub",
            "registry-cache.storage.s3.bucket=cache",
            "registry-cache.cluster.peer-port=9000")
        .run(
            context -> {
              assertThat(context).hasNotFailed();
              assertThat(warnings()).hasSize(4);
              assertThat(warnings())
                  .anySatisfy(
                      w ->
                          assertThat(w)
                              .startsWith("Unknown setting registry-cache.uptreams.x.url ("));
              assertThat(warnings())
                  .anySatisfy(
                      w ->
                          assertThat(w)
                              .startsWith(
                                  "Unknown setting registry-cache.upstreams.hub.tls.insecure ("));
              assertThat(warnings())
                  .anySatisfy(
                      w ->
                          assertThat(w)
                              .startsWith(
                                  "Unknown setting registry-cache.auth.rules[0].upstream ("));
              assertThat(warnings())
                  .anySatisfy(
                      w ->
                          assertThat(w)
                              .startsWith(
                                  "Unknown setting registrycache.upstreams.local.retry.maxattemps (")
                              .contains(
                                  "(from systemEnvironment as REGISTRYCACHE_UPSTREAMS_LOCAL_RETRY_MAXATTEMPS)"));
              assertThat(warnings())
                  .anySatisfy(
                      w ->
                          assertThat(w)
                              .startsWith(
                                  "Unknown setting registry-cache.uptreams.x.url (from test):"));
              assertThat(warnings())
                  .allSatisfy(
                      w ->
                          assertThat(w)
                              .endsWith(
                                  "no setting of registry-cache has this name, so it has no effect (misspelt?)"));
            });
  }
}
