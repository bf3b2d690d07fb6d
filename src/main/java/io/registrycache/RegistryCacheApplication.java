package io.registrycache;

import org.springframework.boot.SpringApplication;
import org.springframework.boot.autoconfigure.SpringBootApplication;
import org.springframework.boot.context.properties.ConfigurationPropertiesScan;

/** Entry point of registry-cache, a pull-only, pull-through caching OCI registry. */
@SpringBootApplication
@ConfigurationPropertiesScan
public class RegistryCacheApplication {

  public static void main(String[] args) {
    SpringApplication.run(RegistryCacheApplication.class, args);
  }
}
