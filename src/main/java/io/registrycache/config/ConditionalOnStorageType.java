package io.registrycache.config;

import java.lang.annotation.ElementType;
import java.lang.annotation.Retention;
import java.lang.annotation.RetentionPolicy;
import java.lang.annotation.Target;
import java.util.Map;
import org.springframework.boot.context.properties.bind.Binder;
import org.springframework.context.annotation.Condition;
import org.springframework.context.annotation.ConditionContext;
import org.springframework.context.annotation.Conditional;
import org.springframework.core.type.AnnotatedTypeMetadata;

/**
 * A bean of one store ({@code registry-cache.storage.type}), read as the enum {@link
 * StorageProperties.Type}: a value that is not a store fails the start-up with a message naming the
 * setting and the stores there are, instead of leaving the service without a store.
 */
@Retention(RetentionPolicy.RUNTIME)
@Target({ElementType.TYPE, ElementType.METHOD})
@Conditional(ConditionalOnStorageType.OnStorageType.class)
public @interface ConditionalOnStorageType {

  /** The store the bean belongs to. */
  StorageProperties.Type value();

  /** Matches when the configured store is the annotation's. */
  final class OnStorageType implements Condition {
    @Override
    public boolean matches(ConditionContext context, AnnotatedTypeMetadata metadata) {
      Map<String, Object> attributes =
          metadata.getAnnotationAttributes(ConditionalOnStorageType.class.getName());
      StorageProperties.Type wanted = (StorageProperties.Type) attributes.get("value");
      StorageProperties.Type configured;
      try {
        configured =
            Binder.get(context.getEnvironment())
                .bind("registry-cache.storage.type", StorageProperties.Type.class)
                .orElse(StorageProperties.Type.FILESYSTEM);
      } catch (RuntimeException e) {
        throw new IllegalStateException(
            "registry-cache.storage.type must be one of filesystem, s3; got '"
                + context.getEnvironment().getProperty("registry-cache.storage.type")
                + "'",
            e);
      }
      return configured == wanted;
    }
  }
}
