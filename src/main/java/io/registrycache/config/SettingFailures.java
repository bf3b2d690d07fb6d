package io.registrycache.config;

import java.nio.file.Path;
import java.util.Collection;
import java.util.regex.Pattern;
import org.springframework.boot.context.properties.bind.BindException;
import org.springframework.boot.context.properties.source.ConfigurationProperty;
import org.springframework.boot.diagnostics.AbstractFailureAnalyzer;
import org.springframework.boot.diagnostics.FailureAnalysis;
import org.springframework.boot.origin.Origin;
import org.springframework.boot.origin.PropertySourceOrigin;
import org.springframework.core.Ordered;
import org.springframework.core.annotation.Order;

/**
 * The configuration errors that stop the service at start, each with Spring Boot's {@link
 * org.springframework.boot.diagnostics.FailureAnalyzer} of its own (registered in {@code
 * META-INF/spring.factories}): the start fails with Spring Boot's "APPLICATION FAILED TO START"
 * report, one line saying what is wrong (the setting, its value) and one line saying what to do,
 * instead of a stack trace. {@link SettingsCheck} throws the exceptions before the application
 * context is refreshed.
 */
public final class SettingFailures {

  private SettingFailures() {}

  private static final String SEE_README =
      "README.md, \"Configuration\", lists every setting and its values.";
  private static final Pattern CONTROL = Pattern.compile("\\p{Cntrl}");

  /** A value as the report shows it: one line whatever it holds. */
  static String shown(Object value) {
    return CONTROL.matcher(String.valueOf(value)).replaceAll("?");
  }

  /**
   * {@code registry-cache.upstreams.<key>.url} unset, or not an absolute http(s) URL with a host.
   */
  public static final class UpstreamUrlException extends IllegalStateException {
    private final String key;
    private final String url;

    /**
     * @param url the value as given, {@code null} when unset
     */
    public UpstreamUrlException(String key, String url) {
      super(
          "registry-cache.upstreams."
              + key
              + ".url "
              + (url == null ? "is not set" : "is not an http or https URL: " + url));
      this.key = key;
      this.url = url;
    }

    public String key() {
      return key;
    }

    public String url() {
      return url;
    }
  }

  /**
   * An upstream key (default upstream, access rule) that no {@code registry-cache.upstreams.<key>}
   * configures.
   */
  public static final class UnknownUpstreamException extends IllegalStateException {
    private final String setting;
    private final String name;
    private final Collection<String> configured;

    /**
     * @param setting the setting that names it, e.g. {@code registry-cache.default-upstream}
     * @param name the key it names
     * @param configured the configured keys
     */
    public UnknownUpstreamException(String setting, String name, Collection<String> configured) {
      super(setting + " names upstream '" + name + "', which is not configured " + configured);
      this.setting = setting;
      this.name = name;
      this.configured = configured;
    }

    public String setting() {
      return setting;
    }

    public String name() {
      return name;
    }

    public Collection<String> configured() {
      return configured;
    }
  }

  /** A file a setting names that is missing, not a regular file, or not readable. */
  public static final class SettingFileException extends IllegalStateException {
    private final String setting;
    private final Path file;
    private final String problem;

    /**
     * @param problem what is wrong with it, e.g. {@code does not exist}
     */
    public SettingFileException(String setting, Path file, String problem) {
      super(setting + " is " + file + ", which " + problem);
      this.setting = setting;
      this.file = file;
      this.problem = problem;
    }

    public String setting() {
      return setting;
    }

    public Path file() {
      return file;
    }

    public String problem() {
      return problem;
    }
  }

  /**
   * A port the service listens on that it cannot bind: in use by another process, or a foreign
   * address.
   */
  public static final class ListenPortException extends IllegalStateException {
    private final String setting;
    private final String addressSetting;
    private final String address;
    private final int port;
    private final boolean inUse;

    /**
     * @param setting the port's setting, e.g. {@code server.port}
     * @param addressSetting the setting of the address it binds to, e.g. {@code server.address}
     * @param address that address, {@code null} for every interface
     * @param inUse whether the port is in use ({@code false}: the address cannot be bound)
     * @param cause the failed bind
     */
    public ListenPortException(
        String setting,
        String addressSetting,
        String address,
        int port,
        boolean inUse,
        Exception cause) {
      super(
          "cannot listen on "
              + (address == null ? "port " + port : address + ":" + port)
              + " ("
              + setting
              + "): "
              + cause.getMessage(),
          cause);
      this.setting = setting;
      this.addressSetting = addressSetting;
      this.address = address;
      this.port = port;
      this.inUse = inUse;
    }

    public String setting() {
      return setting;
    }

    public int port() {
      return port;
    }

    public boolean inUse() {
      return inUse;
    }
  }

  /** {@link UpstreamUrlException}: the upstream's URL. */
  @Order(Ordered.HIGHEST_PRECEDENCE)
  public static final class UpstreamUrlAnalyzer
      extends AbstractFailureAnalyzer<UpstreamUrlException> {
    @Override
    protected FailureAnalysis analyze(Throwable rootFailure, UpstreamUrlException cause) {
      String setting = "registry-cache.upstreams." + shown(cause.key()) + ".url";
      String description =
          cause.url() == null
              ? setting
                  + " is not set: the cache does not know where upstream '"
                  + shown(cause.key())
                  + "' is."
              : setting
                  + " is '"
                  + shown(cause.url())
                  + "', which is not an http or https URL with a host.";
      return new FailureAnalysis(
          description,
          "Set "
              + setting
              + " to the registry's base URL, e.g. https://registry.example.com or http://localhost:5000.",
          cause);
    }
  }

  /**
   * {@link UnknownUpstreamException}: a default upstream or access rule naming an upstream that is
   * not configured.
   */
  @Order(Ordered.HIGHEST_PRECEDENCE)
  public static final class UnknownUpstreamAnalyzer
      extends AbstractFailureAnalyzer<UnknownUpstreamException> {
    @Override
    protected FailureAnalysis analyze(Throwable rootFailure, UnknownUpstreamException cause) {
      String name = shown(cause.name());
      String configured = shown(String.join(", ", cause.configured()));
      String description =
          cause.setting()
              + " names upstream '"
              + name
              + "', which is not configured (upstream keys: "
              + configured
              + ").";
      String action =
          cause.setting().startsWith("registry-cache.auth.rules")
              ? "Name one of "
                  + configured
                  + " or *, configure registry-cache.upstreams."
                  + name
                  + ".url, or set registry-cache.allow-any-upstream=true to name registry hosts in rules."
              : "Set "
                  + cause.setting()
                  + " to one of "
                  + configured
                  + ", or configure registry-cache.upstreams."
                  + name
                  + ".url.";
      return new FailureAnalysis(description, action, cause);
    }
  }

  /** {@link SettingFileException}: a file a setting names. */
  @Order(Ordered.HIGHEST_PRECEDENCE)
  public static final class SettingFileAnalyzer
      extends AbstractFailureAnalyzer<SettingFileException> {
    @Override
    protected FailureAnalysis analyze(Throwable rootFailure, SettingFileException cause) {
      String file = shown(cause.file());
      String description = cause.setting() + " is " + file + ", which " + cause.problem() + ".";
      String action =
          "registry-cache.auth.htpasswd-file".equals(cause.setting())
              ? "Create it (java -jar registry-cache.jar htpasswd --user <name> --password-stdin >> "
                  + file
                  + "), or set "
                  + cause.setting()
                  + " to an existing file."
              : "Create it, or set " + cause.setting() + " to an existing file.";
      return new FailureAnalysis(description, action, cause);
    }
  }

  /** {@link ListenPortException}: a port of the service that cannot be bound. */
  @Order(Ordered.HIGHEST_PRECEDENCE)
  public static final class ListenPortAnalyzer
      extends AbstractFailureAnalyzer<ListenPortException> {
    @Override
    protected FailureAnalysis analyze(Throwable rootFailure, ListenPortException cause) {
      if (cause.inUse()) {
        return new FailureAnalysis(
            "Port " + cause.port() + " (" + cause.setting() + ") is already in use.",
            "Stop the process that listens on port "
                + cause.port()
                + ", or set "
                + cause.setting()
                + " to a free port (e.g. --"
                + cause.setting()
                + "="
                + (cause.port() == 65_535 ? 8090 : cause.port() + 10)
                + ").",
            cause);
      }
      return new FailureAnalysis(
          "Cannot listen on "
              + shown(cause.address)
              + ":"
              + cause.port()
              + " ("
              + cause.addressSetting
              + ", "
              + cause.setting()
              + "): "
              + shown(cause.getCause().getMessage())
              + ".",
          "Set "
              + cause.addressSetting
              + " to an address of this machine, or leave it unset to listen on every interface.",
          cause);
    }
  }

  /**
   * A {@code registry-cache.*} value that does not convert (a duration, a size, a number) or that a
   * settings record refuses: the setting, its value and the reason on one line, where Spring Boot's
   * own analysis takes several.
   */
  @Order(Ordered.HIGHEST_PRECEDENCE + 1)
  public static final class SettingValueAnalyzer extends AbstractFailureAnalyzer<BindException> {
    @Override
    protected FailureAnalysis analyze(Throwable rootFailure, BindException cause) {
      String name = cause.getName().toString();
      if (!name.startsWith("registry-cache")) {
        return null;
      }
      String reason = shown(innermostMessage(cause));
      ConfigurationProperty property = cause.getProperty();
      String description =
          property == null
              ? sentence("Invalid settings under " + name + ": " + reason)
              : sentence(
                  property.getName()
                      + " is '"
                      + shown(property.getValue())
                      + "'"
                      + (property.getOrigin() == null
                          ? ""
                          : " (" + origin(property.getName(), property.getOrigin()) + ")")
                      + ": "
                      + reason);
      return new FailureAnalysis(description, "Correct the setting; " + SEE_README, cause);
    }
  }

  /**
   * Any other refusal of a setting by the service's own code: an {@link IllegalArgumentException}
   * or {@link IllegalStateException} whose message starts with the setting's name ({@code
   * registry-cache.}), e.g. an htpasswd file with an MD5 entry, a username without a password.
   */
  @Order(Ordered.HIGHEST_PRECEDENCE + 2)
  public static final class SettingMessageAnalyzer
      extends AbstractFailureAnalyzer<RuntimeException> {
    @Override
    @SuppressWarnings("ReferenceEquality") // a cause that is the throwable itself ends the walk
    protected FailureAnalysis analyze(Throwable rootFailure, RuntimeException cause) {
      for (Throwable t = rootFailure; t != null; t = t.getCause() == t ? null : t.getCause()) {
        if ((t instanceof IllegalArgumentException || t instanceof IllegalStateException)
            && t.getMessage() != null
            && t.getMessage().startsWith("registry-cache.")) {
          return new FailureAnalysis(
              sentence(t.getMessage()), "Correct that setting; " + SEE_README, t);
        }
      }
      return null;
    }
  }

  /**
   * Where setting {@code name} was set, short: {@code from commandLineArgs} rather than Spring
   * Boot's {@code "<name>" from property source "commandLineArgs"}, with the name as given when it
   * differs (an environment variable's); any other origin as Spring Boot words it (a file's with
   * line and column).
   */
  static String origin(Object name, Origin origin) {
    if (origin instanceof PropertySourceOrigin source) {
      String given = source.getPropertyName();
      return shown(
          "from "
              + source.getPropertySource().getName()
              + (given == null || given.equals(String.valueOf(name)) ? "" : " as " + given));
    }
    return shown(origin);
  }

  /** {@code text} on one line, ending with a full stop. */
  static String sentence(String text) {
    String line = shown(text).strip();
    return line.endsWith(".") || line.endsWith("?") || line.endsWith("!") ? line : line + ".";
  }

  @SuppressWarnings("ReferenceEquality") // a cause that is the throwable itself ends the walk
  private static String innermostMessage(Throwable failure) {
    String message = failure.getMessage();
    for (Throwable t = failure.getCause(); t != null; t = t.getCause() == t ? null : t.getCause()) {
      if (t.getMessage() != null && !t.getMessage().isBlank()) {
        message = t.getMessage();
      }
    }
    return message;
  }
}
