package io.registrycache.policy;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import io.registrycache.config.PolicyProperties.Rule;
import io.registrycache.config.RegistryCacheProperties;
import io.registrycache.oci.Digest;
import io.registrycache.oci.OciErrorCode;
import io.registrycache.oci.OciException;
import java.nio.charset.StandardCharsets;
import java.util.Map;
import org.junit.jupiter.api.Test;
import org.springframework.boot.context.properties.bind.BindException;
import org.springframework.http.HttpStatus;

/** The platform policy's decisions: which rule applies, what it allows, what it learns. */
class PlatformPolicyTest {

  final SimpleMeterRegistry meters = new SimpleMeterRegistry();

  PlatformPolicy policy(Map<String, String> settings) {
    return new PlatformPolicy(RegistryCacheProperties.bind(settings).policy(), meters);
  }

  PlatformPolicy amd64AndArm64ForTeam() {
    return policy(
        Map.of(
            "registry-cache.policy.rules[0].upstreams", "hub",
            "registry-cache.policy.rules[0].repositories", "team/**",
            "registry-cache.policy.rules[0].platforms", "linux/amd64, Linux/ARM64",
            "registry-cache.policy.rules[1].repositories", "**",
            "registry-cache.policy.rules[1].platforms", "linux/s390x"));
  }

  static Digest digest(String seed) {
    return Digest.sha256(seed.getBytes(StandardCharsets.UTF_8));
  }

  static byte[] utf8(String s) {
    return s.getBytes(StandardCharsets.UTF_8);
  }

  double verdicts(String verdict) {
    var c =
        meters
            .find("registry.cache.policy.verdicts")
            .tags("policy", "platform", "verdict", verdict)
            .counter();
    return c == null ? 0 : c.count();
  }

  @Test
  void withoutRulesNoRuleApplies() {
    PlatformPolicy none = policy(Map.of());
    assertThat(none.enabled()).isFalse();
    assertThat(none.ruleFor("hub", "team/app")).isNull();
  }

  @Test
  void theFirstRuleMatchingUpstreamAndRepositoryApplies() {
    PlatformPolicy policy = amd64AndArm64ForTeam();
    assertThat(policy.enabled()).isTrue();
    assertThat(policy.ruleFor("hub", "team/app/web").platforms())
        .containsExactly("linux/amd64", "linux/arm64");
    // another upstream, or a repository outside team/**: the catch-all second rule
    assertThat(policy.ruleFor("other", "team/app").platforms()).containsExactly("linux/s390x");
    assertThat(policy.ruleFor("hub", "library/app").platforms()).containsExactly("linux/s390x");
  }

  @Test
  void aPlatformWithoutVariantAllowsItsVariantsAndNothingElse() {
    Rule rule = amd64AndArm64ForTeam().ruleFor("hub", "team/app");
    assertThat(rule.allows("linux/arm64")).isTrue();
    assertThat(rule.allows("linux/arm64/v8")).isTrue();
    assertThat(rule.allows("LINUX/AMD64")).isTrue();
    assertThat(rule.allows("linux/arm")).isFalse();
    assertThat(rule.allows("linux/amd64v2")).isFalse();
    assertThat(rule.allows("windows/amd64")).isFalse();
    Rule v7 =
        policy(
                Map.of(
                    "registry-cache.policy.rules[0].repositories", "**",
                    "registry-cache.policy.rules[0].platforms", "linux/arm/v7"))
            .ruleFor("any", "x");
    assertThat(v7.allows("linux/arm/v7")).isTrue();
    assertThat(v7.allows("linux/arm/v6")).isFalse();
    assertThat(v7.allows("linux/arm")).isFalse();
  }

  @Test
  void aBadRuleIsAStartUpErrorNamingIt() {
    assertThatThrownBy(
            () ->
                policy(
                    Map.of(
                        "registry-cache.policy.rules[0].repositories", "**",
                        "registry-cache.policy.rules[0].platforms", "amd64")))
        .isInstanceOf(BindException.class)
        .rootCause()
        .hasMessageContaining("policy platform 'amd64' is not os/architecture[/variant]");
    assertThatThrownBy(
            () -> policy(Map.of("registry-cache.policy.rules[0].platforms", "linux/amd64")))
        .rootCause()
        .hasMessageContaining("needs at least one repository pattern");
    assertThatThrownBy(() -> policy(Map.of("registry-cache.policy.rules[0].repositories", "**")))
        .rootCause()
        .hasMessageContaining("needs platforms (e.g. linux/amd64) or require: signed");
    assertThatThrownBy(
            () ->
                policy(
                    Map.of(
                        "registry-cache.policy.rules[0].repositories", "**",
                        "registry-cache.policy.rules[0].require", "signed")))
        .rootCause()
        .hasMessageContaining("needs at least one key file in keys");
  }

  @Test
  void anIndexTeachesItsEntriesPlatformsAndAttestationsFollowWhatTheyAttest() {
    PlatformPolicy policy = amd64AndArm64ForTeam();
    Rule rule = policy.ruleFor("hub", "team/app");
    Digest amd64 = digest("amd64");
    Digest s390x = digest("s390x");
    Digest attestsS390x = digest("attestation");
    Digest noPlatform = digest("none");
    Digest index = digest("index");
    String json =
        """
        {"schemaVersion":2,"mediaType":"application/vnd.oci.image.index.v1+json","manifests":[
          {"mediaType":"application/vnd.oci.image.manifest.v1+json","digest":"%s","size":1,
           "platform":{"os":"linux","architecture":"amd64"}},
          {"mediaType":"application/vnd.oci.image.manifest.v1+json","digest":"%s","size":1,
           "platform":{"os":"linux","architecture":"s390x"}},
          {"mediaType":"application/vnd.oci.image.manifest.v1+json","digest":"%s","size":1,
           "platform":{"os":"unknown","architecture":"unknown"},
           "annotations":{"vnd.docker.reference.type":"attestation-manifest",
                          "vnd.docker.reference.digest":"%s"}},
          {"mediaType":"application/vnd.oci.image.manifest.v1+json","digest":"%s","size":1}
        ]}
        """
            .formatted(amd64, s390x, attestsS390x, s390x, noPlatform);
    assertThat(policy.known(s390x)).isEmpty();

    policy.readIndex(index, utf8(json));

    assertThat(policy.known(amd64)).contains("linux/amd64");
    assertThat(policy.known(s390x)).contains("linux/s390x");
    assertThat(policy.known(attestsS390x)).contains("linux/s390x");
    assertThat(policy.known(noPlatform)).as("left to its config").isEmpty();
    assertThat(policy.known(index)).as("an index is no platform's image").contains("");
    assertThat(policy.refuses(rule, amd64)).isFalse();
    assertThat(policy.refuses(rule, s390x)).isTrue();
    assertThat(policy.refuses(rule, attestsS390x)).isTrue();
    assertThat(policy.refuses(rule, noPlatform)).isFalse();
    assertThat(policy.refuses(rule, index)).isFalse();
  }

  @Test
  void anImageManifestsPlatformComesFromItsConfigAndAnArtifactHasNone() {
    PlatformPolicy policy = amd64AndArm64ForTeam();
    Digest image = digest("image");
    Digest config = digest("config");
    byte[] manifest =
        utf8(
            """
            {"schemaVersion":2,"mediaType":"application/vnd.oci.image.manifest.v1+json",
             "config":{"mediaType":"application/vnd.docker.container.image.v1+json",
                       "digest":"%s","size":2},"layers":[]}
            """
                .formatted(config));
    assertThat(policy.imageConfig(image, manifest)).contains(config);
    assertThat(policy.known(image)).isEmpty();
    assertThat(
            policy.readConfig(
                image, utf8("{\"os\":\"linux\",\"architecture\":\"arm\",\"variant\":\"v7\"}")))
        .contains("linux/arm/v7");
    assertThat(policy.known(image)).contains("linux/arm/v7");
    assertThat(policy.readConfig(digest("x"), utf8("{\"architecture\":\"amd64\"}"))).isEmpty();
    assertThat(policy.readConfig(digest("y"), utf8("not json"))).isEmpty();

    Digest signature = digest("signature");
    byte[] artifact =
        utf8(
            """
            {"schemaVersion":2,"mediaType":"application/vnd.oci.image.manifest.v1+json",
             "config":{"mediaType":"application/vnd.oci.empty.v1+json",
                       "digest":"%s","size":2},"layers":[]}
            """
                .formatted(config));
    assertThat(policy.imageConfig(signature, artifact)).isEmpty();
    assertThat(policy.known(signature)).contains("");
  }

  @Test
  void aRefusalIsDeniedWith403NamingPlatformRepositoryAndPolicyAndIsCounted() {
    PlatformPolicy policy = amd64AndArm64ForTeam();
    Rule rule = policy.ruleFor("hub", "team/app");

    policy.check(rule, "hub/team/app:v1", "linux/arm64/v8");
    policy.check(rule, "hub/team/app:sig", "");
    assertThat(verdicts("allowed")).isEqualTo(2);
    assertThat(verdicts("denied")).isZero();

    assertThatThrownBy(() -> policy.check(rule, "hub/team/app@sha256:abc", "linux/s390x"))
        .isInstanceOfSatisfying(
            OciException.class,
            e -> {
              assertThat(e.code()).isEqualTo(OciErrorCode.DENIED);
              assertThat(e.status()).isEqualTo(HttpStatus.FORBIDDEN);
              assertThat(e.getMessage())
                  .isEqualTo(
                      "platform linux/s390x of hub/team/app@sha256:abc is not allowed by policy"
                          + " platforms=[linux/amd64, linux/arm64]");
            });
    assertThatThrownBy(() -> policy.check(rule, "hub/team/app:odd", null))
        .isInstanceOf(OciException.class)
        .hasMessageContaining("could not be read from its image config");
    assertThat(verdicts("denied")).isEqualTo(2);
  }
}
