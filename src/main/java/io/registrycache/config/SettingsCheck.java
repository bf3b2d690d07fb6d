package io.registrycache.config;

import io.registrycache.config.SettingFailures.ListenPortException;
import io.registrycache.config.SettingFailures.SettingFileException;
import io.registrycache.config.SettingFailures.UnknownUpstreamException;
import io.registrycache.config.SettingFailures.UpstreamUrlException;
import java.io.IOException;
import java.net.BindException;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.ServerSocket;
import java.net.URI;
import java.net.URISyntaxException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Set;
import java.util.TreeSet;
import org.springframework.boot.context.properties.bind.Bindable;
import org.springframework.boot.context.properties.bind.Binder;
import org.springframework.boot.web.server.context.WebServerApplicationContext;
import org.springframework.context.ApplicationContextInitializer;
import org.springframework.context.ConfigurableApplicationContext;
import org.springframework.core.Ordered;

/**
 * Checks the settings before the application context is refreshed, so that a wrong one stops the
 * start at once, with one line of description and one of action ({@link SettingFailures}), rather
 * than a stack trace from deep inside the context, or after the start-up warm-up:
 *
 * <ul>
 *   <li>every {@code registry-cache.*} value binds ({@link RegistryCacheProperties#bind(Binder)});
 *   <li>each {@code registry-cache.upstreams.<key>.url} is set and an http or https URL with a host
 *       (the built-in {@code local} upstream's may be left out);
 *   <li>{@code registry-cache.default-upstream} names a configured upstream (left at {@code local}
 *       with other keys it means the only one, or none);
 *   <li>with {@code registry-cache.auth.enabled}, the upstreams of each access rule are configured
 *       keys or {@code *}: unless {@code allow-any-upstream} is on, where a rule's keys are
 *       registry hosts; so are the upstreams of each policy rule ({@code registry-cache.policy});
 *   <li>the files the settings name exist and can be read;
 *   <li>the ports the service will listen on can be bound (pull port {@code server.port},
 *       management port {@code management.server.port}, a cluster's {@code
 *       registry-cache.cluster.peer-port}): only for a service with a web server, checked by
 *       binding and closing a socket.
 * </ul>
 *
 * Registered in {@code META-INF/spring.factories} as an {@link ApplicationContextInitializer}.
 */
public class SettingsCheck
    implements ApplicationContextInitializer<ConfigurableApplicationContext>, Ordered {

  /** Key of the built-in upstream (as {@code upstream.Upstreams.BUILT_IN_KEY}). */
  static final String BUILT_IN_KEY = "local";

  @Override
  public void initialize(ConfigurableApplicationContext context) {
    Binder binder = Binder.get(context.getEnvironment());
    check(RegistryCacheProperties.bind(binder));
    if (context instanceof WebServerApplicationContext) {
      checkPorts(binder);
    }
  }

  @Override
  public int getOrder() {
    return Ordered.HIGHEST_PRECEDENCE;
  }

  /**
   * The checks of the settings themselves (no ports).
   *
   * @throws UpstreamUrlException, UnknownUpstreamException, SettingFileException for the first
   *     wrong setting found
   */
  public static void check(RegistryCacheProperties properties) {
    UpstreamsProperties upstreams = properties.upstreams();
    Set<String> keys = new TreeSet<>(upstreams.upstreams().keySet());
    if (keys.isEmpty()) {
      keys.add(BUILT_IN_KEY);
    }
    upstreams.upstreams().forEach((key, upstream) -> checkUrl(key, upstream.url()));
    String defaultKey = upstreams.defaultUpstream();
    if (defaultKey != null
        && !defaultKey.isBlank()
        && !keys.contains(defaultKey)
        && !BUILT_IN_KEY.equals(defaultKey)) {
      throw new UnknownUpstreamException("registry-cache.default-upstream", defaultKey, keys);
    }
    AuthProperties auth = properties.auth();
    if (auth.enabled() && !upstreams.allowAnyUpstream()) {
      List<AuthProperties.Rule> rules = auth.rules();
      for (int i = 0; i < rules.size(); i++) {
        for (String key : rules.get(i).upstreams()) {
          if (!"*".equals(key) && !keys.contains(key)) {
            throw new UnknownUpstreamException(
                "registry-cache.auth.rules[" + i + "].upstreams", key, keys);
          }
        }
      }
    }
    if (!upstreams.allowAnyUpstream()) {
      // a mistyped key would leave the policy silently off for the upstream meant
      List<PolicyProperties.Rule> policy = properties.policy().rules();
      for (int i = 0; i < policy.size(); i++) {
        for (String key : policy.get(i).upstreams()) {
          if (!"*".equals(key) && !keys.contains(key)) {
            throw new UnknownUpstreamException(
                "registry-cache.policy.rules[" + i + "].upstreams", key, keys);
          }
        }
      }
    }
    for (Map.Entry<String, Path> file : files(properties).entrySet()) {
      checkFile(file.getKey(), file.getValue());
    }
  }

  private static void checkUrl(String key, String url) {
    if (url == null || url.isBlank()) {
      if (BUILT_IN_KEY.equals(key)) {
        return; // settings for the built-in upstream, which has its URL
      }
      throw new UpstreamUrlException(key, null);
    }
    String stripped = url.endsWith("/") ? url.substring(0, url.length() - 1) : url;
    try {
      URI uri = new URI(stripped);
      String scheme = uri.getScheme() == null ? "" : uri.getScheme();
      if (!(scheme.equals("http") || scheme.equals("https")) || uri.getRawAuthority() == null) {
        throw new UpstreamUrlException(key, url);
      }
    } catch (URISyntaxException e) {
      throw new UpstreamUrlException(key, url);
    }
  }

  /** The files the settings name, by setting, in a stable order; only those that are used. */
  static Map<String, Path> files(RegistryCacheProperties properties) {
    Map<String, Path> files = new LinkedHashMap<>();
    AuthProperties auth = properties.auth();
    if (auth.enabled()) {
      put(files, "registry-cache.auth.htpasswd-file", auth.htpasswdFile());
      put(files, "registry-cache.auth.tokens-file", auth.tokensFile());
      if (auth.token().enabled()) {
        put(files, "registry-cache.auth.token.key-file", auth.token().keyFile());
      }
      for (int i = 0; i < auth.trustedIssuers().size(); i++) {
        put(
            files,
            "registry-cache.auth.trusted-issuers[" + i + "].jwks-file",
            auth.trustedIssuers().get(i).jwksFile());
      }
    }
    put(files, "registry-cache.admin.token-file", properties.admin().tokenFile());
    List<PolicyProperties.Rule> rules = properties.policy().rules();
    for (int i = 0; i < rules.size(); i++) {
      List<Path> keys = rules.get(i).keys();
      for (int j = 0; j < keys.size(); j++) {
        put(files, "registry-cache.policy.rules[" + i + "].keys[" + j + "]", keys.get(j));
      }
    }
    properties
        .upstreams()
        .upstreams()
        .forEach(
            (key, upstream) -> {
              String prefix = "registry-cache.upstreams." + key + ".";
              put(files, prefix + "password-file", upstream.passwordFile());
              put(files, prefix + "tls.ca-file", upstream.tls().caFile());
              put(files, prefix + "tls.cert-file", upstream.tls().certFile());
              put(files, prefix + "tls.key-file", upstream.tls().keyFile());
            });
    return files;
  }

  private static void put(Map<String, Path> files, String setting, Path file) {
    if (file != null) {
      files.put(setting, file);
    }
  }

  private static void checkFile(String setting, Path file) {
    if (!Files.exists(file)) {
      throw new SettingFileException(setting, file, "does not exist");
    }
    if (!Files.isRegularFile(file)) {
      throw new SettingFileException(setting, file, "is not a regular file");
    }
    if (!Files.isReadable(file)) {
      throw new SettingFileException(
          setting, file, "this process (user " + System.getProperty("user.name") + ") cannot read");
    }
  }

  /**
   * Binds and closes each port the service will listen on.
   *
   * @throws ListenPortException for the first port that cannot be bound
   */
  static void checkPorts(Binder binder) {
    int serverPort = binder.bind("server.port", Integer.class).orElse(8080);
    String serverAddress =
        binder.bind("server.address", String.class).map(a -> a.isBlank() ? null : a).orElse(null);
    List<Runnable> checks = new ArrayList<>();
    checks.add(() -> checkPort("server.port", "server.address", serverAddress, serverPort));
    Integer managementPort = binder.bind("management.server.port", Integer.class).orElse(null);
    if (managementPort != null && managementPort > 0 && managementPort != serverPort) {
      String managementAddress =
          binder
              .bind("management.server.address", String.class)
              .map(a -> a.isBlank() ? null : a)
              .orElse(null);
      checks.add(
          () ->
              checkPort(
                  "management.server.port",
                  "management.server.address",
                  managementAddress,
                  managementPort));
    }
    boolean cluster =
        !binder
                .bind("registry-cache.cluster.peers", Bindable.listOf(String.class))
                .orElse(List.of())
                .isEmpty()
            || binder
                .bind("registry-cache.cluster.peers-dns", String.class)
                .map(d -> !d.isBlank())
                .orElse(false);
    if (cluster) {
      int peerPort = binder.bind("registry-cache.cluster.peer-port", Integer.class).orElse(8082);
      String peerAddress =
          binder
              .bind("registry-cache.cluster.peer-address", String.class)
              .map(a -> a.isBlank() ? null : a)
              .orElse(null);
      checks.add(
          () ->
              checkPort(
                  "registry-cache.cluster.peer-port",
                  peerAddress != null ? "registry-cache.cluster.peer-address" : "server.address",
                  peerAddress != null ? peerAddress : serverAddress,
                  peerPort));
    }
    checks.forEach(Runnable::run);
  }

  /**
   * Binds {@code port} on {@code address} ({@code null}: every interface) and closes it again; 0 is
   * not checked.
   */
  static void checkPort(String setting, String addressSetting, String address, int port) {
    if (port <= 0) {
      return;
    }
    try (ServerSocket socket = new ServerSocket()) {
      socket.setReuseAddress(
          true); // as Reactor Netty's servers: a port with connections in TIME_WAIT is free
      socket.bind(
          address == null
              ? new InetSocketAddress(port)
              : new InetSocketAddress(InetAddress.getByName(address), port));
    } catch (BindException e) {
      boolean inUse =
          e.getMessage() != null && e.getMessage().toLowerCase(Locale.ROOT).contains("in use");
      throw new ListenPortException(setting, addressSetting, address, port, inUse, e);
    } catch (IOException e) {
      throw new ListenPortException(setting, addressSetting, address, port, false, e);
    }
  }
}
