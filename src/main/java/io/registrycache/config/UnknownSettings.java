package io.registrycache.config;

import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.Set;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import org.springframework.beans.factory.SmartInitializingSingleton;
import org.springframework.boot.context.properties.ConfigurationPropertiesBean;
import org.springframework.boot.context.properties.bind.AbstractBindHandler;
import org.springframework.boot.context.properties.bind.BindContext;
import org.springframework.boot.context.properties.bind.Bindable;
import org.springframework.boot.context.properties.bind.Binder;
import org.springframework.boot.context.properties.source.ConfigurationProperty;
import org.springframework.boot.context.properties.source.ConfigurationPropertyName;
import org.springframework.boot.context.properties.source.ConfigurationPropertySource;
import org.springframework.boot.context.properties.source.ConfigurationPropertySources;
import org.springframework.boot.context.properties.source.IterableConfigurationPropertySource;
import org.springframework.context.ApplicationContext;
import org.springframework.core.env.ConfigurableEnvironment;
import org.springframework.stereotype.Component;

/**
 * Warns at start, once per key, about each {@code registry-cache.*} setting that no settings record
 * takes, e.g. a misspelt {@code registry-cache.uptreams.x.url}: Spring Boot ignores such a key
 * silently, and the service would run without the setting the operator meant. A key counts as known
 * when binding the service's {@code @ConfigurationProperties} records with the prefix {@code
 * registry-cache} uses it; the sources looked at are all of the environment's (arguments,
 * environment variables in their canonical form, application.properties, ...). Runs after the
 * singletons are created, before anything starts (warm-up, ports).
 */
@Component
public class UnknownSettings implements SmartInitializingSingleton {

  private static final Logger log = LoggerFactory.getLogger(UnknownSettings.class);

  static final ConfigurationPropertyName PREFIX = ConfigurationPropertyName.of("registry-cache");

  /**
   * Keys read outside the records: the AOT cache training run's system property
   * (startup.AotTraining).
   */
  static final Set<ConfigurationPropertyName> READ_ELSEWHERE =
      Set.of(ConfigurationPropertyName.of("registry-cache.aot-training"));

  private final ApplicationContext context;
  private final ConfigurableEnvironment environment;

  public UnknownSettings(ApplicationContext context, ConfigurableEnvironment environment) {
    this.context = context;
    this.environment = environment;
  }

  @Override
  public void afterSingletonsInstantiated() {
    Map<String, Bindable<?>> byPrefix = new LinkedHashMap<>();
    for (ConfigurationPropertiesBean bean : ConfigurationPropertiesBean.getAll(context).values()) {
      String prefix = bean.getAnnotation().prefix();
      if (prefix.equals("registry-cache") || prefix.startsWith("registry-cache.")) {
        byPrefix.put(prefix + " " + bean.getName(), bean.asBindTarget());
      }
    }
    for (Map.Entry<ConfigurationPropertyName, String> unknown :
        unknown(environment, byPrefix).entrySet()) {
      log.warn(
          "Unknown setting {}{}: no setting of registry-cache has this name, so it has no effect (misspelt?)",
          unknown.getKey(),
          unknown.getValue() == null ? "" : " (" + unknown.getValue() + ")");
    }
  }

  /**
   * The keys under {@code registry-cache} in {@code environment} that binding {@code targets} (by
   * {@code "<prefix> <anything>"}) does not use, with where each was set (null when unknown).
   */
  static Map<ConfigurationPropertyName, String> unknown(
      ConfigurableEnvironment environment, Map<String, Bindable<?>> targets) {
    Set<ConfigurationPropertyName> bound = new HashSet<>();
    AbstractBindHandler recorder =
        new AbstractBindHandler() {
          @Override
          public Object onSuccess(
              ConfigurationPropertyName name,
              Bindable<?> target,
              BindContext context,
              Object result) {
            bound.add(name);
            ConfigurationProperty property = context.getConfigurationProperty();
            if (property != null) {
              bound.add(property.getName());
            }
            return result;
          }
        };
    Binder binder = Binder.get(environment);
    targets.forEach(
        (key, target) -> {
          try {
            binder.bind(key.substring(0, key.indexOf(' ')), target, recorder);
          } catch (RuntimeException e) {
            // a value that does not bind stopped the start already (SettingsCheck) or will
          }
        });
    Map<ConfigurationPropertyName, String> unknown = new LinkedHashMap<>();
    for (ConfigurationPropertySource source : ConfigurationPropertySources.get(environment)) {
      if (!(source instanceof IterableConfigurationPropertySource iterable)) {
        continue;
      }
      iterable.stream()
          .filter(
              name ->
                  PREFIX.isAncestorOf(name)
                      && !bound.contains(name)
                      && !READ_ELSEWHERE.contains(name))
          .forEach(
              name ->
                  unknown.computeIfAbsent(
                      name,
                      n -> {
                        ConfigurationProperty property = source.getConfigurationProperty(n);
                        return property == null || property.getOrigin() == null
                            ? null
                            : SettingFailures.origin(n, property.getOrigin());
                      }));
    }
    return unknown;
  }
}
