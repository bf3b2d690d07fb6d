package io.registrycache.config;

import java.util.Map;
import org.springframework.boot.context.properties.bind.Bindable;
import org.springframework.boot.context.properties.bind.Binder;
import org.springframework.boot.context.properties.source.MapConfigurationPropertySource;

/**
 * Everything an operator sets under the prefix {@code registry-cache}, one record per concern, each
 * bound by Spring Boot from its own prefix with its defaults in {@code @DefaultValue} (the one
 * source of defaults; IDE metadata is generated from them). This record only holds them together,
 * so that a class that reads several concerns takes one parameter. Every property can be set by an
 * environment variable in Spring Boot's canonical form, e.g. {@code REGISTRYCACHE_STORAGE_PATH} or
 * {@code REGISTRYCACHE_UPSTREAMS_LOCAL_URL}.
 *
 * @param storage {@code registry-cache.storage.*}
 * @param manifests {@code registry-cache.manifests.*}
 * @param blobs {@code registry-cache.blobs.*}
 * @param referrers {@code registry-cache.referrers.*}
 * @param prune {@code registry-cache.prune.*}
 * @param admin {@code registry-cache.admin.*}
 * @param accessLog {@code registry-cache.access-log.*}
 * @param preload {@code registry-cache.preload.*}
 * @param upstreams {@code registry-cache.upstreams.*}, {@code default-upstream}, {@code
 *     allow-any-upstream}, {@code offline}
 * @param auth {@code registry-cache.auth.*}: who may pull
 * @param rateLimit {@code registry-cache.rate-limit.*}: how much each identity may pull
 * @param policy {@code registry-cache.policy.*}: what may be pulled at all (platforms)
 */
public record RegistryCacheProperties(
    StorageProperties storage,
    ManifestsProperties manifests,
    BlobsProperties blobs,
    ReferrersProperties referrers,
    PruneProperties prune,
    AdminProperties admin,
    AccessLogProperties accessLog,
    PreloadProperties preload,
    UpstreamsProperties upstreams,
    AuthProperties auth,
    RateLimitProperties rateLimit,
    PolicyProperties policy) {

  /** Every default, as a service started without any setting has them. */
  public static RegistryCacheProperties defaults() {
    return bind(Map.of());
  }

  /**
   * The settings {@code properties} make, bound exactly as Spring Boot binds them at start-up; keys
   * in the canonical form, e.g. {@code registry-cache.storage.max-bytes}, values as strings (lists
   * comma-separated). For tests and tools.
   *
   * @throws org.springframework.boot.context.properties.bind.BindException when a value does not
   *     convert or a record refuses it
   */
  public static RegistryCacheProperties bind(Map<String, ?> properties) {
    return bind(new Binder(new MapConfigurationPropertySource(properties)));
  }

  /**
   * The settings {@code binder} holds (e.g. {@code Binder.get(environment)}), bound as Spring Boot
   * binds them at start-up.
   *
   * @throws org.springframework.boot.context.properties.bind.BindException when a value does not
   *     convert or a record refuses it
   */
  public static RegistryCacheProperties bind(Binder binder) {
    return new RegistryCacheProperties(
        bind(binder, "registry-cache.storage", StorageProperties.class),
        bind(binder, "registry-cache.manifests", ManifestsProperties.class),
        bind(binder, "registry-cache.blobs", BlobsProperties.class),
        bind(binder, "registry-cache.referrers", ReferrersProperties.class),
        bind(binder, "registry-cache.prune", PruneProperties.class),
        bind(binder, "registry-cache.admin", AdminProperties.class),
        bind(binder, "registry-cache.access-log", AccessLogProperties.class),
        bind(binder, "registry-cache.preload", PreloadProperties.class),
        bind(binder, "registry-cache", UpstreamsProperties.class),
        bind(binder, "registry-cache.auth", AuthProperties.class),
        bind(binder, "registry-cache.rate-limit", RateLimitProperties.class),
        bind(binder, "registry-cache.policy", PolicyProperties.class));
  }

  /**
   * One upstream's settings from {@code properties} relative to {@code
   * registry-cache.upstreams.<key>}, e.g. {@code url}, {@code redirect.allowed-hosts}; every other
   * setting at its default.
   */
  public static UpstreamProperties upstream(Map<String, ?> properties) {
    return new Binder(new MapConfigurationPropertySource(properties))
        .bindOrCreate("", Bindable.of(UpstreamProperties.class));
  }

  private static <T> T bind(Binder binder, String prefix, Class<T> type) {
    return binder.bindOrCreate(prefix, Bindable.of(type));
  }
}
