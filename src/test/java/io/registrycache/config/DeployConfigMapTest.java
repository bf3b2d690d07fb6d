package io.registrycache.config;

import static org.assertj.core.api.Assertions.assertThat;

import java.io.IOException;
import java.io.Reader;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;
import org.springframework.boot.context.properties.bind.Bindable;
import org.springframework.boot.context.properties.bind.Binder;
import org.springframework.boot.context.properties.source.ConfigurationPropertySources;
import org.springframework.core.env.MutablePropertySources;
import org.springframework.core.env.StandardEnvironment;
import org.springframework.core.env.SystemEnvironmentPropertySource;
import org.springframework.util.unit.DataSize;
import org.yaml.snakeyaml.Yaml;

/**
 * The environment of the chart's renderings (deploy/kubernetes/registry-cache.yaml and
 * deploy/kubernetes-ha/registry-cache.yaml, made by deploy/render.sh from
 * deploy/helm/registry-cache) binds as the values files say: the container gets the ConfigMap as
 * environment variables (envFrom) and the Deployment's own {@code env} on top, so a misspelt name
 * in a template would be ignored silently in a cluster. Variables read from Secrets get a
 * placeholder value here, so that their names are checked too.
 */
class DeployConfigMapTest {

  private static final String FROM_SECRET = "value-from-a-secret";

  @SuppressWarnings("unchecked")
  private static Binder binderOfContainer(String rendering) throws IOException {
    List<Map<String, Object>> docs = new ArrayList<>();
    try (Reader in = Files.newBufferedReader(Path.of(rendering))) {
      for (Object doc : new Yaml().loadAll(in)) {
        if (doc != null) {
          docs.add((Map<String, Object>) doc);
        }
      }
    }
    Map<String, Object> deployment =
        docs.stream()
            .filter(d -> "Deployment".equals(d.get("kind")))
            .reduce(
                (a, b) -> {
                  throw new AssertionError("more than one Deployment in " + rendering);
                })
            .orElseThrow();
    Map<String, Object> container =
        ((List<Map<String, Object>>)
                ((Map<String, Object>)
                        ((Map<String, Object>)
                                ((Map<String, Object>) deployment.get("spec")).get("template"))
                            .get("spec"))
                    .get("containers"))
            .get(0);
    Map<String, Object> environment = new LinkedHashMap<>();
    for (Map<String, Object> from : (List<Map<String, Object>>) container.get("envFrom")) {
      String configMap = (String) ((Map<String, Object>) from.get("configMapRef")).get("name");
      Map<String, Object> data =
          docs.stream()
              .filter(d -> "ConfigMap".equals(d.get("kind")))
              .filter(d -> configMap.equals(((Map<String, Object>) d.get("metadata")).get("name")))
              .findFirst()
              .orElseThrow(
                  () -> new AssertionError("no ConfigMap " + configMap + " in " + rendering));
      environment.putAll((Map<String, Object>) data.get("data"));
    }
    for (Map<String, Object> env : (List<Map<String, Object>>) container.get("env")) {
      environment.put(
          (String) env.get("name"), env.containsKey("value") ? env.get("value") : FROM_SECRET);
    }
    MutablePropertySources sources = new MutablePropertySources();
    sources.addFirst(
        new SystemEnvironmentPropertySource(
            StandardEnvironment.SYSTEM_ENVIRONMENT_PROPERTY_SOURCE_NAME, environment));
    return new Binder(ConfigurationPropertySources.from(sources));
  }

  @Test
  void singleReplicaAuthenticatesRateLimitsAndKeepsItsBudgetOnTheVolume() throws IOException {
    Binder binder = binderOfContainer("deploy/kubernetes/registry-cache.yaml");
    AuthProperties auth =
        binder.bindOrCreate("registry-cache.auth", Bindable.of(AuthProperties.class));
    assertThat(auth.enabled()).isTrue();
    assertThat(auth.htpasswdFile()).isEqualTo(Path.of("/etc/registry-cache/auth/htpasswd"));
    assertThat(auth.tokensFile()).isEqualTo(Path.of("/etc/registry-cache/auth/tokens"));
    assertThat(auth.rules())
        .singleElement()
        .satisfies(
            rule -> {
              assertThat(rule.subjects()).containsExactly("authenticated");
              assertThat(rule.repositories())
                  .extracting(RepositoryGlob::pattern)
                  .containsExactly("**");
            });
    RateLimitProperties limits =
        binder.bindOrCreate("registry-cache.rate-limit", Bindable.of(RateLimitProperties.class));
    assertThat(limits.enabled()).isTrue();
    assertThat(limits.authenticated()).isEqualTo(new RateLimitProperties.Limits(100, 400, 8));

    UpstreamsProperties upstreams =
        binder.bindOrCreate("registry-cache", Bindable.of(UpstreamsProperties.class));
    assertThat(upstreams.defaultUpstream()).isEqualTo("corp");
    assertThat(upstreams.upstreams()).containsOnlyKeys("corp");
    UpstreamProperties corp = upstreams.upstreams().get("corp");
    assertThat(corp.host()).isEqualTo("registry.example.com");
    assertThat(corp.url()).isEqualTo("https://registry.example.com");
    assertThat(corp.username()).isEqualTo(FROM_SECRET);
    assertThat(corp.password()).isEqualTo(FROM_SECRET);

    StorageProperties storage =
        binder.bindOrCreate("registry-cache.storage", Bindable.of(StorageProperties.class));
    assertThat(storage.type()).isEqualTo(StorageProperties.Type.FILESYSTEM);
    assertThat(storage.path()).isEqualTo(Path.of("/var/lib/registry-cache"));
    assertThat(storage.maxBytes()).isEqualTo(90_000_000_000L);
    AdminProperties admin =
        binder.bindOrCreate("registry-cache.admin", Bindable.of(AdminProperties.class));
    assertThat(admin.token()).isEqualTo(FROM_SECRET);
    PreloadProperties preload =
        binder.bindOrCreate("registry-cache.preload", Bindable.of(PreloadProperties.class));
    assertThat(preload.file()).isEqualTo(Path.of("/etc/registry-cache/preload/preload.txt"));
  }

  @Test
  void replicasShareTheBucketAndFindEachOtherThroughTheHeadlessService() throws IOException {
    Binder binder = binderOfContainer("deploy/kubernetes-ha/registry-cache.yaml");
    StorageProperties storage =
        binder.bindOrCreate("registry-cache.storage", Bindable.of(StorageProperties.class));
    assertThat(storage.type()).isEqualTo(StorageProperties.Type.S3);
    assertThat(storage.path()).isEqualTo(Path.of("/var/lib/registry-cache"));
    assertThat(binder.bind("registry-cache.storage.s3.bucket", String.class).get())
        .isEqualTo("registry-cache");
    assertThat(binder.bind("registry-cache.storage.s3.endpoint", String.class).get())
        .isEqualTo("http://minio.storage.svc.cluster.local:9000");
    assertThat(binder.bind("registry-cache.storage.s3.path-style", Boolean.class).get()).isTrue();
    assertThat(binder.bind("registry-cache.storage.s3.local-tier-size", DataSize.class).get())
        .isEqualTo(DataSize.ofGigabytes(12));
    assertThat(binder.bind("registry-cache.cluster.peers-dns", String.class).get())
        .isEqualTo("registry-cache-peers");
    assertThat(binder.bind("registry-cache.cluster.peer-port", Integer.class).get())
        .isEqualTo(8082);
    assertThat(binder.bind("registry-cache.cluster.token-file", Path.class).get())
        .isEqualTo(Path.of("/var/run/registry-cache/peer/token"));
    assertThat(binder.bind("registry-cache.cluster.self", String.class).get())
        .isEqualTo("$(POD_IP):8082");
    UpstreamsProperties upstreams =
        binder.bindOrCreate("registry-cache", Bindable.of(UpstreamsProperties.class));
    assertThat(upstreams.defaultUpstream()).isEqualTo("corp");
    assertThat(upstreams.upstreams().get("corp").url()).isEqualTo("https://registry.example.com");
  }
}
