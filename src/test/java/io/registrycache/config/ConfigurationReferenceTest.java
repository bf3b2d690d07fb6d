package io.registrycache.config;

import static org.assertj.core.api.Assertions.assertThat;

import java.io.IOException;
import java.lang.reflect.RecordComponent;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.Locale;
import java.util.Set;
import java.util.TreeSet;
import org.junit.jupiter.api.Test;
import tools.jackson.databind.JsonNode;
import tools.jackson.databind.json.JsonMapper;

/**
 * docs/configuration.md is the reference generated from the configuration metadata, and the
 * metadata names every setting of an upstream, an access rule and a trusted issuer (the processor
 * does not descend into map and list values, so those come from {@code
 * additional-spring-configuration-metadata.json}, checked here against the records).
 */
class ConfigurationReferenceTest {

  private static final Path METADATA =
      Path.of("target/classes/META-INF/spring-configuration-metadata.json");
  private static final Path REFERENCE = Path.of("docs/configuration.md");

  private static JsonNode metadata() throws IOException {
    return JsonMapper.builder().build().readTree(Files.readString(METADATA));
  }

  @Test
  void theCommittedReferenceIsTheOneTheMetadataGives() throws IOException {
    String generated = ConfigurationReference.render(metadata());
    if (Boolean.getBoolean("configuration-reference.write")) {
      Files.writeString(REFERENCE, generated);
    }
    String committed = Files.exists(REFERENCE) ? Files.readString(REFERENCE) : "";
    assertThat(committed)
        .as(
            "docs/configuration.md differs from the configuration metadata; regenerate it: %s"
                + " (after a change to additional-spring-configuration-metadata.json alone, with"
                + " 'clean' first: javac merges it)",
            ConfigurationReference.COMMAND)
        .isEqualTo(generated);
  }

  @Test
  void theMetadataNamesEverySettingOfAnUpstreamARulePolicyRuleAndATrustedIssuer()
      throws IOException {
    Set<String> named = new TreeSet<>();
    metadata().path("properties").forEach(p -> named.add(p.path("name").asString()));
    for (Root root :
        List.of(
            new Root(UpstreamProperties.class, "registry-cache.upstreams.*."),
            new Root(AuthProperties.Rule.class, "registry-cache.auth.rules[*]."),
            new Root(PolicyProperties.Rule.class, "registry-cache.policy.rules[*]."),
            new Root(
                AuthProperties.TrustedIssuer.class, "registry-cache.auth.trusted-issuers[*]."))) {
      Set<String> settings = new TreeSet<>();
      settings(root.type(), root.prefix(), settings);
      Set<String> inMetadata = new TreeSet<>(named);
      inMetadata.removeIf(n -> !n.startsWith(root.prefix()));
      assertThat(inMetadata)
          .as(
              "additional-spring-configuration-metadata.json for %s (an entry per component)",
              root.type())
          .isEqualTo(settings);
    }
  }

  @Test
  void javadocCodeBecomesMarkdownCodeAndTypesLoseTheirPackages() {
    assertThat(ConfigurationReference.description("default {@code local}; {@link RepositoryGlob}"))
        .isEqualTo("default `local`; `RepositoryGlob`");
    assertThat(ConfigurationReference.type("java.util.List<io.registrycache.config.Auth$Rule>"))
        .isEqualTo("List<Auth.Rule>");
    assertThat(ConfigurationReference.section("registry-cache.auth.rules[*].subjects"))
        .isEqualTo("registry-cache.auth");
    assertThat(ConfigurationReference.section("registry-cache.offline"))
        .isEqualTo("registry-cache");
    assertThat(ConfigurationReference.section("management.endpoint.cache.cache.time-to-live"))
        .isEqualTo("management.endpoint.cache");
  }

  /** A record bound under a map or list value, and the names its settings take. */
  private record Root(Class<?> type, String prefix) {}

  /** Property names of a record's components, kebab-case, nested records of this package too. */
  private static void settings(Class<?> type, String prefix, Set<String> out) {
    for (RecordComponent c : type.getRecordComponents()) {
      String name = prefix + kebab(c.getName());
      if (c.getType().isRecord() && c.getType().getPackage().equals(type.getPackage())) {
        settings(c.getType(), name + ".", out);
      } else {
        out.add(name);
      }
    }
  }

  private static String kebab(String camelCase) {
    return camelCase.replaceAll("([A-Z])", "-$1").toLowerCase(Locale.ROOT);
  }
}
