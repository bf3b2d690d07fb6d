package io.registrycache.policy;

import com.github.benmanes.caffeine.cache.Cache;
import com.github.benmanes.caffeine.cache.Caffeine;
import io.micrometer.core.instrument.Counter;
import io.micrometer.core.instrument.MeterRegistry;
import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import io.registrycache.config.PolicyProperties;
import io.registrycache.config.PolicyProperties.Rule;
import io.registrycache.config.RegistryCacheProperties;
import io.registrycache.oci.Digest;
import io.registrycache.oci.Json;
import io.registrycache.oci.OciErrorCode;
import io.registrycache.oci.OciException;
import java.util.HashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Optional;
import org.springframework.beans.factory.annotation.Autowired;
import org.springframework.stereotype.Component;
import tools.jackson.core.JacksonException;
import tools.jackson.databind.JsonNode;

/**
 * The platform policy ({@code registry-cache.policy.rules[*].platforms}, docs/policy.md): which
 * platforms' image manifests the cache serves for a repository. The decision only; the pull path
 * ({@code proxy}) asks it before and after a manifest is looked up.
 *
 * <p>A manifest's platform is known from an image index that lists it ({@code platform} of the
 * index entry, OCI Image Spec v1.1 "Image Index"; an attestation entry, annotation {@code
 * vnd.docker.reference.type: attestation-manifest}, takes the platform of the entry its {@code
 * vnd.docker.reference.digest} names), or from its image config ({@code os}, {@code architecture},
 * {@code variant}, OCI Image Spec "Image Configuration"). What is learnt is remembered per digest
 * (bounded, in memory), so a manifest is judged from memory after the first time.
 *
 * <p>Verdicts are counted as {@code registry_cache_policy_verdicts_total{policy="platform",
 * verdict="allowed|denied"}}, one per manifest request a rule applies to.
 */
@Component
public final class PlatformPolicy {

  /** What is remembered for a manifest that is not a platform's image (an artifact, an index). */
  private static final String NO_PLATFORM = "";

  private static final List<String> IMAGE_CONFIG_TYPES =
      List.of(
          "application/vnd.oci.image.config.v1+json",
          "application/vnd.docker.container.image.v1+json");

  private final List<Rule> rules;
  private final Counter allowed;
  private final Counter denied;

  /**
   * Manifest digest to its platform ({@code os/architecture[/variant]}) or {@link #NO_PLATFORM}.
   */
  private final Cache<Digest, String> platforms =
      Caffeine.newBuilder().maximumSize(100_000).build();

  /**
   * @param settings {@code registry-cache.policy}
   * @param meters where the verdicts are counted
   */
  @Autowired
  public PlatformPolicy(RegistryCacheProperties settings, MeterRegistry meters) {
    this(settings.policy(), meters);
  }

  /**
   * @param settings the rules
   * @param meters where the verdicts are counted
   */
  public PlatformPolicy(PolicyProperties settings, MeterRegistry meters) {
    this.rules =
        settings.rules().stream().anyMatch(r -> !r.platforms().isEmpty())
            ? settings.rules()
            : List.of();
    this.allowed = verdicts(meters, "allowed");
    this.denied = verdicts(meters, "denied");
  }

  /** No rule: every manifest is served (for services built without Spring). */
  public static PlatformPolicy none() {
    return new PlatformPolicy(PolicyProperties.none(), new SimpleMeterRegistry());
  }

  private static Counter verdicts(MeterRegistry meters, String verdict) {
    return Counter.builder("registry.cache.policy.verdicts")
        .description("manifest requests a policy rule applied to, by its verdict")
        .tag("policy", "platform")
        .tag("verdict", verdict)
        .register(meters);
  }

  /** Whether any rule names platforms. */
  public boolean enabled() {
    return !rules.isEmpty();
  }

  /**
   * The rule for {@code repository} (canonical name) of the upstream keyed {@code upstream}: the
   * first that matches, when it names platforms; {@code null} when none matches or the first that
   * does names none (a rule of signatures only; always, and at once, with no rules).
   */
  public Rule ruleFor(String upstream, String repository) {
    if (rules.isEmpty()) {
      return null;
    }
    for (Rule rule : rules) {
      if (rule.matches(upstream, repository)) {
        return rule.platforms().isEmpty() ? null : rule;
      }
    }
    return null;
  }

  /**
   * What is known of manifest {@code digest}'s platform: {@code os/architecture[/variant]}, or
   * {@code ""} when it is no platform's image; empty when nothing is known yet.
   */
  public Optional<String> known(Digest digest) {
    return Optional.ofNullable(platforms.getIfPresent(digest));
  }

  /**
   * Whether {@code rule} refuses manifest {@code digest} from what is known of it already: false
   * when it is allowed or not known.
   */
  public boolean refuses(Rule rule, Digest digest) {
    String platform = platforms.getIfPresent(digest);
    return platform != null && !platform.isEmpty() && !rule.allows(platform);
  }

  /**
   * Learns the platforms of the entries of image index {@code digest} ({@code body} its exact
   * bytes); an index already read is not read again. Entries without a platform are left unknown.
   */
  public void readIndex(Digest digest, byte[] body) {
    if (platforms.getIfPresent(digest) != null) {
      return;
    }
    JsonNode root;
    try {
      root = Json.MAPPER.readTree(body);
    } catch (JacksonException e) {
      return; // checked as a manifest before it got here; nothing to learn
    }
    Map<String, String> byDigest = new HashMap<>();
    for (JsonNode entry : root.path("manifests")) {
      String platform = platformOf(entry.path("platform"));
      if (platform != null) {
        byDigest.put(entry.path("digest").asString(""), platform);
      }
    }
    for (JsonNode entry : root.path("manifests")) {
      String child = entry.path("digest").asString("");
      String platform = byDigest.get(child);
      JsonNode annotations = entry.path("annotations");
      if ("attestation-manifest"
          .equals(annotations.path("vnd.docker.reference.type").asString(""))) {
        String attested =
            byDigest.get(annotations.path("vnd.docker.reference.digest").asString(""));
        if (attested != null) {
          platform = attested;
        }
      }
      if (platform != null) {
        try {
          platforms.put(Digest.parse(child), platform);
        } catch (OciException e) {
          // an entry without a valid digest: ManifestContent refuses such an index anyway
        }
      }
    }
    platforms.put(digest, NO_PLATFORM); // last: its entries are known once it counts as read
  }

  /**
   * The image config of image manifest {@code body}: the config descriptor's digest when its media
   * type is an image config (OCI or Docker); empty for an artifact (any other config media type),
   * which then counts as no platform's image ({@link #known} gives {@code ""} for {@code
   * manifest}).
   */
  public Optional<Digest> imageConfig(Digest manifest, byte[] body) {
    try {
      JsonNode config = Json.MAPPER.readTree(body).path("config");
      if (IMAGE_CONFIG_TYPES.contains(config.path("mediaType").asString(""))) {
        return Optional.of(Digest.parse(config.path("digest").asString("")));
      }
    } catch (JacksonException | OciException e) {
      // not an image's manifest as far as the policy can tell: judged as an artifact below
    }
    platforms.put(manifest, NO_PLATFORM);
    return Optional.empty();
  }

  /**
   * Learns manifest {@code manifest}'s platform from its image config {@code config} (JSON with
   * {@code os}, {@code architecture}, optional {@code variant}).
   *
   * @return the platform, {@code os/architecture[/variant]}; empty when the config names none (then
   *     nothing is learnt, and no rule allows it)
   */
  public Optional<String> readConfig(Digest manifest, byte[] config) {
    String platform;
    try {
      platform = platformOf(Json.MAPPER.readTree(config));
    } catch (JacksonException e) {
      platform = null;
    }
    if (platform == null) {
      return Optional.empty();
    }
    platforms.put(manifest, platform);
    return Optional.of(platform);
  }

  /**
   * The verdict of {@code rule} on a manifest of {@code platform} (null when it could not be told),
   * counted.
   *
   * @param what {@code <upstream>/<repository>[:@]<reference>}, for the error
   * @throws OciException {@code DENIED} (403) naming the platform, the repository and the rule's
   *     platforms, when the rule does not allow it
   */
  public void check(Rule rule, String what, String platform) {
    if (platform != null && (platform.isEmpty() || rule.allows(platform))) {
      allowed.increment();
      return;
    }
    throw deny(rule, what, platform);
  }

  /** Counts a verdict reached elsewhere: {@code denied} for a manifest left out by the policy. */
  public OciException deny(Rule rule, String what, String platform) {
    denied.increment();
    return new OciException(
        OciErrorCode.DENIED,
        (platform == null
                ? "the platform of " + what + " could not be read from its image config"
                : "platform " + platform + " of " + what + " is not allowed")
            + " by policy platforms="
            + rule.platforms());
  }

  /** {@code os/architecture[/variant]} of a platform object or an image config; null without. */
  private static String platformOf(JsonNode node) {
    String os = node.path("os").asString("");
    String architecture = node.path("architecture").asString("");
    if (os.isEmpty() || architecture.isEmpty()) {
      return null;
    }
    String variant = node.path("variant").asString("");
    return (os + "/" + architecture + (variant.isEmpty() ? "" : "/" + variant))
        .toLowerCase(Locale.ROOT);
  }
}
