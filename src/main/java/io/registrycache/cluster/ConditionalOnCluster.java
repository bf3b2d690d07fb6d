package io.registrycache.cluster;

import java.lang.annotation.ElementType;
import java.lang.annotation.Retention;
import java.lang.annotation.RetentionPolicy;
import java.lang.annotation.Target;
import org.springframework.boot.autoconfigure.condition.ConditionOutcome;
import org.springframework.boot.autoconfigure.condition.SpringBootCondition;
import org.springframework.boot.context.properties.bind.Bindable;
import org.springframework.boot.context.properties.bind.Binder;
import org.springframework.context.annotation.ConditionContext;
import org.springframework.context.annotation.Conditional;
import org.springframework.core.type.AnnotatedTypeMetadata;

/**
 * A bean of a cluster of replicas: made only when one is configured ({@code
 * registry-cache.cluster.peers} or {@code registry-cache.cluster.peers-dns} set, as {@link
 * ClusterProperties#enabled()} says). A single replica (the default) makes none of them and loads
 * none of their classes; consumers take them through an {@code ObjectProvider}.
 */
@Retention(RetentionPolicy.RUNTIME)
@Target({ElementType.TYPE, ElementType.METHOD})
@Conditional(ConditionalOnCluster.OnCluster.class)
public @interface ConditionalOnCluster {

  /** Matches when {@code peers} has an entry or {@code peers-dns} is not blank. */
  final class OnCluster extends SpringBootCondition {
    @Override
    public ConditionOutcome getMatchOutcome(
        ConditionContext context, AnnotatedTypeMetadata metadata) {
      Binder binder = Binder.get(context.getEnvironment());
      boolean peers =
          binder
              .bind("registry-cache.cluster.peers", Bindable.listOf(String.class))
              .map(list -> list.stream().anyMatch(p -> p != null && !p.isBlank()))
              .orElse(false);
      boolean dns =
          binder
              .bind("registry-cache.cluster.peers-dns", String.class)
              .map(name -> !name.isBlank())
              .orElse(false);
      return peers || dns
          ? ConditionOutcome.match("registry-cache.cluster.peers or peers-dns is set")
          : ConditionOutcome.noMatch(
              "no registry-cache.cluster.peers or peers-dns: a single replica");
    }
  }
}
