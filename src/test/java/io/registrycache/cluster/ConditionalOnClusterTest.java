package io.registrycache.cluster;

import static org.assertj.core.api.Assertions.assertThat;

import org.junit.jupiter.api.Test;
import org.springframework.boot.test.context.runner.ApplicationContextRunner;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Configuration;

class ConditionalOnClusterTest {

  @Configuration(proxyBeanMethods = false)
  static class ClusterOnly {
    @Bean
    @ConditionalOnCluster
    String clusterBean() {
      return "made";
    }
  }

  private final ApplicationContextRunner runner =
      new ApplicationContextRunner().withUserConfiguration(ClusterOnly.class);

  @Test
  void noPeersNoBean() {
    runner.run(context -> assertThat(context).doesNotHaveBean("clusterBean"));
  }

  @Test
  void blankPeersNoBean() {
    runner
        .withPropertyValues("registry-cache.cluster.peers=", "registry-cache.cluster.peers-dns= ")
        .run(context -> assertThat(context).doesNotHaveBean("clusterBean"));
  }

  @Test
  void aStaticListMakesTheBean() {
    runner
        .withPropertyValues(
            "registry-cache.cluster.peers[0]=10.0.0.1:8082",
            "registry-cache.cluster.peers[1]=10.0.0.2:8082")
        .run(context -> assertThat(context).hasBean("clusterBean"));
  }

  @Test
  void aCommaSeparatedListAsFromAnEnvironmentVariableMakesTheBean() {
    runner
        .withPropertyValues("registry-cache.cluster.peers=10.0.0.1:8082,10.0.0.2:8082")
        .run(context -> assertThat(context).hasBean("clusterBean"));
  }

  @Test
  void aDnsNameMakesTheBean() {
    runner
        .withPropertyValues("registry-cache.cluster.peers-dns=registry-cache-peers.default.svc")
        .run(context -> assertThat(context).hasBean("clusterBean"));
  }
}
