package io.registrycache.config;

import java.nio.file.Path;
import org.springframework.boot.context.properties.ConfigurationProperties;
import org.springframework.boot.context.properties.bind.DefaultValue;

/**
 * {@code registry-cache.admin.*}: the management port's protection (docs/security.md). With a token
 * set (inline or from a file), every actuator request but {@code health} (and {@code prometheus}
 * when {@code public-prometheus}) must carry {@code Authorization: Bearer <token>}; without one,
 * those requests are answered only for loopback clients (403 otherwise).
 *
 * @param token the bearer token itself, e.g. from an environment variable; empty (the default)
 *     means none; never logged
 * @param tokenFile a file holding the bearer token (a mounted Secret); surrounding white space is
 *     ignored; unset by default
 * @param publicPrometheus whether {@code /actuator/prometheus} is open without the token; default
 *     true
 * @param maxPatternLength longest {@code filter} / {@code pattern} regular expression accepted, in
 *     characters; default 256
 * @param warmUpPulls synthetic images pulled through the service's own pull-through code, cold and
 *     warm, before the pull port opens, so that the first clients' pulls find it compiled ({@code
 *     startup.StartupWarmUp}; from a loopback upstream into a throw-away store); 0 = none, the
 *     default: with the image's AOT cache it costs more start time and memory than it saves
 *     (docs/performance.md, "Start-up")
 */
@ConfigurationProperties("registry-cache.admin")
public record AdminProperties(
    @DefaultValue("") String token,
    Path tokenFile,
    @DefaultValue("true") boolean publicPrometheus,
    @DefaultValue("256") int maxPatternLength,
    @DefaultValue("0") int warmUpPulls) {

  @Override
  public String toString() {
    return "AdminProperties[token="
        + (token.isEmpty() ? "" : "***")
        + ", tokenFile="
        + tokenFile
        + ", publicPrometheus="
        + publicPrometheus
        + ", maxPatternLength="
        + maxPatternLength
        + ", warmUpPulls="
        + warmUpPulls
        + "]";
  }
}
