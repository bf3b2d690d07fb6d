package io.registrycache.management;

import org.springframework.beans.factory.SmartInitializingSingleton;
import org.springframework.boot.actuate.autoconfigure.web.server.ManagementPortType;
import org.springframework.context.ApplicationContext;
import org.springframework.security.web.server.WebFilterChainProxy;
import org.springframework.stereotype.Component;

/**
 * Start-up checks in the main context that keep Spring Security where {@link ManagementSecurity}
 * puts it: on the management port, away from the registry port. Fails the start when
 *
 * <ul>
 *   <li>{@code management.server.port} equals {@code server.port} (or is unset): the actuator would
 *       be served on the registry port, where no access rule guards it
 *   <li>the main context holds a Spring Security web filter chain ({@link WebFilterChainProxy}):
 *       Spring Boot's security auto-configuration for it is excluded in {@code
 *       application.properties} ({@code spring.autoconfigure.exclude}); a configuration that
 *       replaces that list must keep those entries, or every {@code /v2} request WebFlux serves
 *       would pass Spring Security's firewall and a login with a generated password
 * </ul>
 *
 * A negative {@code management.server.port} (no management server) is fine.
 */
@Component
class ManagementPortCheck implements SmartInitializingSingleton {

  private final ApplicationContext context;

  ManagementPortCheck(ApplicationContext context) {
    this.context = context;
  }

  @Override
  public void afterSingletonsInstantiated() {
    if (ManagementPortType.get(context.getEnvironment()) == ManagementPortType.SAME) {
      throw new IllegalStateException(
          "management.server.port must be a port of its own (8081 by default), not "
              + "server.port: the actuator's admin operations are guarded on the management port only");
    }
    String[] chains = context.getBeanNamesForType(WebFilterChainProxy.class, false, false);
    if (chains.length > 0) {
      throw new IllegalStateException(
          "Spring Security's web filter chain "
              + String.join(", ", chains)
              + " is in the registry port's context; keep the security auto-configurations listed in "
              + "spring.autoconfigure.exclude (application.properties) when setting that property");
    }
  }
}
