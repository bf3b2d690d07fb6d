package io.registrycache.config;

import org.springframework.boot.context.properties.EnableConfigurationProperties;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Configuration;

/**
 * Binds the per-concern settings records ({@code registry-cache.*}) and holds them together as
 * {@link RegistryCacheProperties}. Tests that wire part of the application import this class.
 */
@Configuration(proxyBeanMethods = false)
@EnableConfigurationProperties({
  StorageProperties.class,
  ManifestsProperties.class,
  BlobsProperties.class,
  ReferrersProperties.class,
  PruneProperties.class,
  AdminProperties.class,
  AccessLogProperties.class,
  PreloadProperties.class,
  UpstreamsProperties.class,
  AuthProperties.class,
  RateLimitProperties.class,
  PolicyProperties.class
})
public class PropertiesConfiguration {

  /** The per-concern settings, held together for classes that read several of them. */
  @Bean
  public RegistryCacheProperties registryCacheProperties(
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
    return new RegistryCacheProperties(
        storage, manifests, blobs, referrers, prune, admin, accessLog, preload, upstreams, auth,
        rateLimit, policy);
  }
}
