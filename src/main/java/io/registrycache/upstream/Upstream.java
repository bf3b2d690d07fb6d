package io.registrycache.upstream;

import io.registrycache.config.UpstreamProperties;
import io.registrycache.oci.OciErrorCode;
import io.registrycache.oci.OciException;
import io.registrycache.oci.RepositoryName;
import java.net.URI;
import java.util.Set;

/**
 * One configured upstream registry, resolved from configuration.
 *
 * @param key the configuration key (e.g. {@code local}); used in metrics and on disk
 * @param host registry host name as clients name it in {@code ns=} and in-path requests
 * @param url base URL fetched from (scheme, host, port; no path)
 * @param aliases other host names meaning this upstream
 * @param dockerHubNaming whether single-component names get the {@code library/} prefix
 * @param settings the configuration this upstream was built from (credentials, TLS, timeouts)
 * @param client for a pass-through upstream ({@code credentials: passthrough}), the credentials of
 *     the client this upstream is fetched for ({@link #forClient}); {@code null} otherwise, and on
 *     the configured upstream itself (then the upstream is asked anonymously)
 * @param passthrough whether this upstream is fetched with each client's own credentials ({@code
 *     credentials: passthrough}), read from {@code settings} once
 * @param pullThrough the pull-through lists of {@code settings} ({@code
 *     registry-cache.upstreams.<key>.pull-through}), or {@code null} when they let every repository
 *     through (the default), so a pull checks nothing
 */
public record Upstream(
    String key,
    String host,
    URI url,
    Set<String> aliases,
    boolean dockerHubNaming,
    UpstreamProperties settings,
    ClientCredential client,
    boolean passthrough,
    UpstreamProperties.PullThrough pullThrough) {

  /**
   * @throws IllegalArgumentException when {@code key} is not a valid {@link UpstreamKey}
   */
  public Upstream {
    new UpstreamKey(key);
  }

  /**
   * An upstream as configured, fetched with the cache's credentials (or, if pass-through,
   * anonymously).
   */
  public Upstream(
      String key,
      String host,
      URI url,
      Set<String> aliases,
      boolean dockerHubNaming,
      UpstreamProperties settings) {
    this(
        key,
        host,
        url,
        aliases,
        dockerHubNaming,
        settings,
        null,
        settings != null && settings.passthrough(),
        restricting(settings));
  }

  /**
   * The pull-through lists of {@code settings}, or {@code null} when they let every name through.
   */
  private static UpstreamProperties.PullThrough restricting(UpstreamProperties settings) {
    if (settings == null) {
      return null;
    }
    UpstreamProperties.PullThrough lists = settings.pullThrough();
    return lists.allow().isEmpty() && lists.deny().isEmpty() ? null : lists;
  }

  /**
   * This upstream, fetched with {@code credential} when it is a pass-through upstream; every
   * request made with the result (a fill, its retries and resumes, a confirmation) sends them.
   * Unchanged for an upstream fetched with the cache's credentials.
   */
  public Upstream forClient(ClientCredential credential) {
    if (!passthrough()) {
      return this;
    }
    return new Upstream(
        key,
        host,
        url,
        aliases,
        dockerHubNaming,
        settings,
        credential == null ? ClientCredential.ANONYMOUS : credential,
        passthrough,
        pullThrough);
  }

  /**
   * This upstream without any client's credentials, as configured: what may be kept beyond a
   * request.
   */
  public Upstream withoutClient() {
    return client == null
        ? this
        : new Upstream(
            key, host, url, aliases, dockerHubNaming, settings, null, passthrough, pullThrough);
  }

  /**
   * The client credentials this upstream is fetched with: {@link ClientCredential#ANONYMOUS} when
   * none.
   */
  public ClientCredential clientCredential() {
    return client == null ? ClientCredential.ANONYMOUS : client;
  }

  /**
   * The name under which a repository is fetched and cached: with Docker Hub naming, {@code alpine}
   * becomes {@code library/alpine}.
   */
  public RepositoryName canonical(RepositoryName name) {
    if (dockerHubNaming && name.componentCount() == 1) {
      return new RepositoryName("library/" + name.value());
    }
    return name;
  }

  /**
   * Checks this upstream's pull-through lists ({@code
   * registry-cache.upstreams.<key>.pull-through}).
   *
   * @param name the canonical repository name
   * @throws OciException 404 {@code NAME_UNKNOWN} when the lists refuse {@code name}: the cache
   *     answers as a registry does for a repository it does not hold (OCI Distribution Spec v1.1,
   *     "Error Codes"); nothing is looked up or requested from the upstream
   */
  public void requirePullThrough(RepositoryName name) {
    if (pullThrough != null && !pullThrough.permits(name.value())) {
      throw new OciException(
          OciErrorCode.NAME_UNKNOWN,
          "repository '"
              + name.value()
              + "' is not served through upstream '"
              + key
              + "' by this cache");
    }
  }

  @Override
  public String toString() {
    return key + " (" + host + " at " + url + ")";
  }
}
