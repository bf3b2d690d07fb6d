package io.registrycache.signature;

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
import io.registrycache.oci.OciException;
import io.registrycache.oci.RepositoryName;
import io.registrycache.signature.SignatureVerdict.Reason;
import io.registrycache.signature.SignatureVerdict.Refused;
import io.registrycache.signature.SignatureVerdict.Verified;
import io.registrycache.upstream.Upstream;
import io.registrycache.upstream.UpstreamClient;
import java.nio.file.Path;
import java.time.Clock;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import org.springframework.beans.factory.annotation.Autowired;
import org.springframework.stereotype.Component;
import reactor.core.publisher.Mono;
import tools.jackson.core.JacksonException;
import tools.jackson.databind.JsonNode;

/**
 * The signature policy ({@code registry-cache.policy.rules[*].require: signed}, docs/policy.md):
 * whether an image manifest or index may be stored and served, by its cosign signatures at the
 * upstream ({@link SignatureVerifier}, with the rule's keys). The decision and its memory; the
 * manifest path ({@code proxy}) asks it before a manifest from the upstream is stored and before a
 * stored one is served.
 *
 * <p>Verdicts are remembered per upstream, repository and manifest digest for {@code
 * registry-cache.policy.signatures.verdict-ttl}, then verified again; sooner when the image's
 * referrers list, refreshed after {@code referrers.ttl}, differs from the stored one ({@link
 * #referrersChanged}). A verified image whose signatures cannot be fetched again ({@link
 * Reason#FETCH_FAILED}: upstream down or failing) is still allowed up to {@code max-stale} past
 * that TTL; a fetch failure is never remembered, so an image never verified is refused until its
 * signatures can be read.
 *
 * <p>Judged: image manifests (an image config, OCI or Docker) and image indexes. Not judged, always
 * allowed: artifacts (another config media type, or an {@code artifactType}), manifests whose every
 * layer is a signature or attestation (cosign's own signature manifests), and indexes whose every
 * entry is an artifact without platform (a referrers tag schema index).
 *
 * <p>A child manifest listed in an index this replica verified (for the same upstream and
 * repository) is allowed while that index's verdict allows it, since {@code cosign sign} of an
 * index signs the index only; otherwise a child needs a signature of its own.
 *
 * <p>Verdicts are counted as {@code registry_cache_policy_verdicts_total{policy="signature",
 * verdict="allowed|denied|stale"}}, one per manifest request or upstream fetch a {@code signed}
 * rule applies to; {@code stale} is an image allowed past its verdict's TTL.
 */
@Component
public final class SignaturePolicy {

  private static final Logger log = LoggerFactory.getLogger(SignaturePolicy.class);

  private static final List<String> IMAGE_CONFIG_TYPES =
      List.of(
          "application/vnd.oci.image.config.v1+json",
          "application/vnd.docker.container.image.v1+json");

  /** Layer media types of signatures and attestations, which no container runs. */
  private static final List<String> SIGNATURE_LAYER_PREFIXES =
      List.of(
          SignatureVerifier.SIMPLE_SIGNING,
          SignatureVerifier.BUNDLE_PREFIX,
          SignatureVerifier.IN_TOTO,
          "application/vnd.dsse.envelope");

  private static final int MAX_REMEMBERED = 100_000;

  private final List<Rule> rules;
  private final Map<Rule, SignatureVerifier> verifiers;
  private final Duration ttl;
  private final Duration maxStale;
  private final Clock clock;
  private final Counter allowed;
  private final Counter denied;
  private final Counter stale;

  /** The last verdict that was not a fetch failure, and when it was reached. */
  private final Cache<Key, Judged> verdicts;

  /** A child manifest's key to the digest of an index, verified, that lists it. */
  private final Cache<Key, Digest> listedIn =
      Caffeine.newBuilder().maximumSize(MAX_REMEMBERED).build();

  /** Whether the manifest of a digest is judged at all (an image or an image index). */
  private final Cache<Digest, Boolean> judged =
      Caffeine.newBuilder().maximumSize(MAX_REMEMBERED).build();

  private final Map<Key, Mono<SignatureVerdict>> inFlight = new ConcurrentHashMap<>();

  /**
   * @param settings {@code registry-cache.policy}
   * @param upstreams where signatures are fetched
   * @param meters where the verdicts are counted
   * @param clock the clock verdicts are timed with
   * @throws IllegalArgumentException starting {@code registry-cache.policy.rules[N].keys[M]}, when
   *     a key file cannot be used (not PEM, not a public key, a key type or size not accepted)
   */
  @Autowired
  public SignaturePolicy(
      RegistryCacheProperties settings,
      UpstreamClient upstreams,
      MeterRegistry meters,
      Clock clock) {
    this(settings.policy(), upstreams, meters, clock);
  }

  /** As the other constructor, from the policy settings alone. */
  public SignaturePolicy(
      PolicyProperties settings, UpstreamClient upstreams, MeterRegistry meters, Clock clock) {
    this.rules = settings.rules();
    Map<Rule, SignatureVerifier> byRule = new HashMap<>();
    for (int i = 0; i < rules.size(); i++) {
      Rule rule = rules.get(i);
      if (rule.signed()) {
        byRule.put(rule, new SignatureVerifier(upstreams, keys(i, rule.keys())));
      }
    }
    this.verifiers = Map.copyOf(byRule);
    this.ttl = settings.signatures().verdictTtl();
    this.maxStale = settings.signatures().maxStale();
    this.clock = clock;
    this.verdicts =
        Caffeine.newBuilder()
            .maximumSize(MAX_REMEMBERED)
            .expireAfterWrite(ttl.plus(maxStale))
            .build();
    this.allowed = verdicts(meters, "allowed");
    this.denied = verdicts(meters, "denied");
    this.stale = verdicts(meters, "stale");
  }

  /** No rule: nothing is judged (for services built without Spring). */
  public static SignaturePolicy none() {
    return new SignaturePolicy(
        PolicyProperties.none(), null, new SimpleMeterRegistry(), Clock.systemUTC());
  }

  private static SigningKeys keys(int rule, List<Path> files) {
    List<SigningKey> keys = new ArrayList<>();
    for (int j = 0; j < files.size(); j++) {
      try {
        keys.add(SigningKeys.read(files.get(j)));
      } catch (IllegalArgumentException e) {
        throw new IllegalArgumentException(
            "registry-cache.policy.rules[" + rule + "].keys[" + j + "]: " + e.getMessage(), e);
      }
    }
    return new SigningKeys(keys);
  }

  private static Counter verdicts(MeterRegistry meters, String verdict) {
    return Counter.builder("registry.cache.policy.verdicts")
        .description("manifest requests a policy rule applied to, by its verdict")
        .tag("policy", "signature")
        .tag("verdict", verdict)
        .register(meters);
  }

  /** Whether any rule requires signatures. */
  public boolean enabled() {
    return !verifiers.isEmpty();
  }

  /**
   * The rule for {@code repository} (canonical name) of the upstream keyed {@code upstream} when it
   * requires signatures: the first rule that matches, if it has {@code require: signed}; {@code
   * null} otherwise (at once when no rule requires signatures).
   */
  public Rule ruleFor(String upstream, String repository) {
    if (verifiers.isEmpty()) {
      return null;
    }
    for (Rule rule : rules) {
      if (rule.matches(upstream, repository)) {
        return rule.signed() ? rule : null;
      }
    }
    return null;
  }

  /**
   * The verdict of {@code rule} on manifest {@code digest} of {@code name} at {@code upstream},
   * counted: from memory while it is younger than {@code verdict-ttl}, else verified at the
   * upstream (one verification per image at a time).
   *
   * @param body the manifest's exact bytes (whether it is judged at all; an index's children)
   * @param what {@code <upstream>/<repository>[:@]<reference>}, for the error
   * @return empty when the manifest may be stored and served; errors with {@link OciException}
   *     {@code DENIED} (403) naming the policy and the reason ({@link Refused#denied}) when not
   */
  public Mono<Void> check(
      Rule rule, Upstream upstream, RepositoryName name, Digest digest, byte[] body, String what) {
    if (!judged.get(digest, d -> isImage(body))) {
      allowed.increment();
      return Mono.empty();
    }
    Key key = new Key(upstream.key(), name.value(), digest);
    Mono<Outcome> own = Mono.defer(() -> outcome(rule, upstream, name, key, body));
    Digest index = listedIn.getIfPresent(key);
    Mono<Outcome> outcome =
        index == null
            ? own
            : outcome(rule, upstream, name, new Key(key.upstream(), key.repository(), index), null)
                .flatMap(listed -> listed.refused() == null ? Mono.just(listed) : own);
    return outcome.flatMap(
        o -> {
          if (o.refused() != null) {
            denied.increment();
            return Mono.error(o.refused().denied(what));
          }
          (o.stale() ? stale : allowed).increment();
          return Mono.empty();
        });
  }

  private Mono<Outcome> outcome(
      Rule rule, Upstream upstream, RepositoryName name, Key key, byte[] body) {
    Judged last = verdicts.getIfPresent(key);
    if (last != null && clock.instant().isBefore(last.at().plus(ttl))) {
      return Mono.just(Outcome.of(last.verdict()));
    }
    return verify(rule, upstream, name, key)
        .map(
            verdict -> {
              Instant now = clock.instant();
              if (verdict instanceof Refused refused && refused.reason() == Reason.FETCH_FAILED) {
                if (last != null
                    && last.verdict() instanceof Verified
                    && now.isBefore(last.at().plus(ttl).plus(maxStale))) {
                  log.warn(
                      "serving {}/{}@{} on its signature verdict of {}: {}",
                      key.upstream(),
                      key.repository(),
                      key.digest(),
                      last.at(),
                      refused.detail());
                  return new Outcome(null, true);
                }
                return new Outcome(refused, false); // not remembered: the next request asks again
              }
              verdicts.put(key, new Judged(verdict, now));
              if (verdict instanceof Verified && body != null) {
                learnChildren(key, body);
              }
              return Outcome.of(verdict);
            });
  }

  /**
   * Makes the next request for manifest {@code digest} of {@code repository} at the upstream keyed
   * {@code upstream} verify its signatures again, its verdict's TTL notwithstanding: its referrers
   * changed (a signature added or removed). A verified image stays servable up to {@code max-stale}
   * from now while its signatures cannot be fetched; nothing happens for an image not judged yet.
   */
  public void referrersChanged(String upstream, String repository, Digest digest) {
    Key key = new Key(upstream, repository, digest);
    Judged last = verdicts.getIfPresent(key);
    if (last != null) {
      verdicts.put(key, new Judged(last.verdict(), clock.instant().minus(ttl)));
    }
  }

  /** One verification per image at a time; requests meanwhile share its verdict. */
  private Mono<SignatureVerdict> verify(
      Rule rule, Upstream upstream, RepositoryName name, Key key) {
    return Mono.defer(
        () ->
            inFlight.computeIfAbsent(
                key,
                k ->
                    verifiers
                        .get(rule)
                        .verify(upstream, name, k.digest())
                        .onErrorResume(
                            e ->
                                Mono.just(
                                    new Refused(
                                        Reason.FETCH_FAILED,
                                        "verifying failed: " + e.getMessage())))
                        .doFinally(signal -> inFlight.remove(k))
                        .cache()));
  }

  /** Remembers the entries of a verified image index as listed in it. */
  private void learnChildren(Key index, byte[] body) {
    try {
      for (JsonNode entry : Json.MAPPER.readTree(body).path("manifests")) {
        try {
          listedIn.put(
              new Key(
                  index.upstream(),
                  index.repository(),
                  Digest.parse(entry.path("digest").asString(""))),
              index.digest());
        } catch (OciException e) {
          // an entry without a valid digest: ManifestContent refuses such an index anyway
        }
      }
    } catch (JacksonException e) {
      // not JSON: nothing listed
    }
  }

  /**
   * Whether a manifest is an image's (judged): an index with an entry that is no artifact or has a
   * platform, or an image manifest with a layer that is no signature or attestation. Unreadable
   * bytes are judged.
   */
  static boolean isImage(byte[] body) {
    JsonNode root;
    try {
      root = Json.MAPPER.readTree(body);
    } catch (JacksonException e) {
      return true;
    }
    if (!root.path("artifactType").asString("").isEmpty()) {
      return false;
    }
    JsonNode manifests = root.path("manifests");
    if (manifests.isArray()) {
      if (manifests.isEmpty()) {
        return true;
      }
      for (JsonNode entry : manifests) {
        if (entry.path("artifactType").asString("").isEmpty()
            || !entry.path("platform").isMissingNode()) {
          return true;
        }
      }
      return false;
    }
    if (!IMAGE_CONFIG_TYPES.contains(root.path("config").path("mediaType").asString(""))) {
      return false;
    }
    JsonNode layers = root.path("layers");
    if (!layers.isArray() || layers.isEmpty()) {
      return true;
    }
    for (JsonNode layer : layers) {
      String type = layer.path("mediaType").asString("");
      if (SIGNATURE_LAYER_PREFIXES.stream().noneMatch(type::startsWith)) {
        return true;
      }
    }
    return false;
  }

  /** An image of a repository at an upstream. */
  private record Key(String upstream, String repository, Digest digest) {}

  /** A verdict and when it was reached. */
  private record Judged(SignatureVerdict verdict, Instant at) {}

  /**
   * What a request gets: allowed (fresh, or {@code stale} past the TTL), or refused.
   *
   * @param refused why not; null when allowed
   */
  private record Outcome(Refused refused, boolean stale) {
    static Outcome of(SignatureVerdict verdict) {
      return new Outcome(verdict instanceof Refused r ? r : null, false);
    }
  }
}
