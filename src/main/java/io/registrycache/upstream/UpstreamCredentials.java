package io.registrycache.upstream;

import com.google.cloud.tools.jib.api.Credential;
import com.google.cloud.tools.jib.api.CredentialRetriever;
import com.google.cloud.tools.jib.api.ImageReference;
import com.google.cloud.tools.jib.api.LogEvent;
import com.google.cloud.tools.jib.frontend.CredentialRetrieverFactory;
import com.google.cloud.tools.jib.registry.credentials.CredentialRetrievalException;
import io.registrycache.config.UpstreamProperties;
import io.registrycache.oci.RepositoryName;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.function.Consumer;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Where the credential for an upstream comes from, in this order: the configured {@code username}
 * with {@code password} or {@code password-file}; else, with {@code docker-config-credentials},
 * jib-core's Docker-compatible lookup ({@code config.json} auths and credential helpers, then the
 * well-known helpers); else none (anonymous).
 *
 * <p>Blocking (files, helper processes): call on the authentication scheduler only. Secrets are
 * never logged: jib's {@code Credential.toString()} prints the password, so credentials never go
 * into a log statement or message.
 */
final class UpstreamCredentials {

  private static final Logger log = LoggerFactory.getLogger(UpstreamCredentials.class);

  private UpstreamCredentials() {}

  /** Fails fast at start-up on a half-configured credential. */
  static void validate(String upstreamKey, UpstreamProperties settings) {
    boolean hasPassword = settings.password() != null || settings.passwordFile() != null;
    if (settings.username() != null && !hasPassword) {
      throw new IllegalStateException(
          "registry-cache.upstreams."
              + upstreamKey
              + ".username is set without password or password-file");
    }
    if (settings.username() == null && hasPassword) {
      throw new IllegalStateException(
          "registry-cache.upstreams." + upstreamKey + ".password(-file) is set without username");
    }
  }

  /**
   * The credential to present to {@code upstream} for {@code repository}, or empty for anonymous.
   *
   * @throws IllegalStateException naming the setting when the password file cannot be read
   */
  static Optional<Credential> resolve(Upstream upstream, RepositoryName repository) {
    return resolve(upstream, repository, System.getenv());
  }

  /** As {@link #resolve(Upstream, RepositoryName)}, with the environment given (for tests). */
  static Optional<Credential> resolve(
      Upstream upstream, RepositoryName repository, Map<String, String> environment) {
    UpstreamProperties settings = upstream.settings();
    if (settings.username() != null) {
      return Optional.of(Credential.from(settings.username(), password(upstream)));
    }
    if (settings.dockerConfigCredentials()) {
      return fromDockerConfig(upstream, repository, environment);
    }
    return Optional.empty();
  }

  private static String password(Upstream upstream) {
    UpstreamProperties settings = upstream.settings();
    if (settings.password() != null) {
      return settings.password();
    }
    if (settings.passwordFile() == null) {
      return "";
    }
    try {
      // Read on every token fetch, so a rotated file takes effect without a restart.
      return stripTrailingNewline(
          Files.readString(settings.passwordFile(), StandardCharsets.UTF_8));
    } catch (IOException e) {
      throw new IllegalStateException(
          "registry-cache.upstreams."
              + upstream.key()
              + ".password-file "
              + settings.passwordFile()
              + " cannot be read: "
              + e.getClass().getSimpleName());
    }
  }

  static String stripTrailingNewline(String s) {
    if (s.endsWith("\r\n")) {
      return s.substring(0, s.length() - 2);
    }
    if (s.endsWith("\n")) {
      return s.substring(0, s.length() - 1);
    }
    return s;
  }

  private static Optional<Credential> fromDockerConfig(
      Upstream upstream, RepositoryName repository, Map<String, String> environment) {
    Consumer<LogEvent> logger =
        event ->
            log.debug("upstream '{}' credential lookup: {}", upstream.key(), event.getMessage());
    ImageReference image = ImageReference.of(upstream.host(), repository.value(), null);
    CredentialRetrieverFactory factory =
        CredentialRetrieverFactory.forImage(image, logger, environment);
    List<CredentialRetriever> sources = new ArrayList<>();
    // jib-core's dockerConfig() reads only ~/.docker/config.json; the Docker CLI honours
    // DOCKER_CONFIG first, and so do we (jib's Maven and Gradle plugins do the same).
    String dockerConfigDir = environment.get("DOCKER_CONFIG");
    if (dockerConfigDir != null && !dockerConfigDir.isBlank()) {
      sources.add(factory.dockerConfig(Path.of(dockerConfigDir, "config.json")));
    }
    sources.add(factory.dockerConfig());
    sources.add(factory.wellKnownCredentialHelpers());
    for (CredentialRetriever retriever : sources) {
      try {
        Optional<Credential> credential = retriever.retrieve();
        if (credential.isPresent()) {
          return credential;
        }
      } catch (CredentialRetrievalException e) {
        log.warn(
            "upstream '{}': Docker credential lookup failed ({}); trying the next source",
            upstream.key(),
            e.getClass().getSimpleName());
      }
    }
    return Optional.empty();
  }
}
