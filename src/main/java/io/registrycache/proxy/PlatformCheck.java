package io.registrycache.proxy;

import io.registrycache.config.PolicyProperties.Rule;
import io.registrycache.oci.Digest;
import io.registrycache.oci.OciErrorCode;
import io.registrycache.oci.OciException;
import io.registrycache.oci.Reference;
import io.registrycache.oci.RepositoryName;
import io.registrycache.policy.PlatformPolicy;
import io.registrycache.storage.StoredManifest;
import io.registrycache.upstream.Upstream;
import java.util.Optional;
import org.springframework.beans.factory.annotation.Autowired;
import org.springframework.core.ResolvableType;
import org.springframework.core.codec.ByteArrayDecoder;
import org.springframework.core.io.buffer.DataBufferLimitException;
import org.springframework.core.io.buffer.DataBufferUtils;
import org.springframework.core.io.buffer.DefaultDataBufferFactory;
import org.springframework.stereotype.Component;
import reactor.core.publisher.Mono;

/**
 * The platform policy on the manifest path ({@link PlatformPolicy}, docs/policy.md): a manifest
 * asked for by digest that the policy already knows to be of a platform its rule leaves out is
 * refused before any lookup, so neither the store nor the upstream is asked; any other manifest is
 * looked up as usual and judged before it is served. An image index is always served, byte for byte
 * (its entries' platforms are learnt from it); an image manifest whose platform is not known from
 * an index is judged by its image config, read through the blob cache (so the client's own request
 * for the config is then a hit).
 */
@Component
public class PlatformCheck {

  // A joined body's bytes: Spring's decoder copies them out and releases the buffer.
  private static final ByteArrayDecoder BODY = new ByteArrayDecoder();
  private static final ResolvableType BYTE_ARRAY = ResolvableType.forClass(byte[].class);

  /** An image config larger than this is not read: its platform is unknown, so it is refused. */
  static final int MAX_CONFIG_BYTES = 4 * 1024 * 1024;

  private final PlatformPolicy policy;
  private final ProxyBlobService blobs;

  @Autowired
  public PlatformCheck(PlatformPolicy policy, ProxyBlobService blobs) {
    this.policy = policy;
    this.blobs = blobs;
  }

  /** No policy (for services built without Spring). */
  static PlatformCheck none() {
    return new PlatformCheck(PlatformPolicy.none(), null);
  }

  /** The policy. */
  PlatformPolicy policy() {
    return policy;
  }

  /** The rule for {@code name} of {@code upstream}, or {@code null} when none applies. */
  Rule ruleFor(Upstream upstream, RepositoryName name) {
    return policy.ruleFor(upstream.key(), name.value());
  }

  /**
   * {@code lookup} (the manifest {@code reference}, not yet subscribed) under {@code rule}.
   *
   * @return the lookup's result when the policy allows it; errors with {@link OciException} {@code
   *     DENIED} (403) when it does not, without subscribing to {@code lookup} when that is known
   *     beforehand; {@code MANIFEST_UNKNOWN} (404) when the image config that would tell the
   *     platform is not to be had (not stored, and the upstream has none or the cache is offline);
   *     the upstream's failure when reading the config failed otherwise (nothing is remembered
   *     then: the next request tries again)
   */
  Mono<ManifestResult> police(
      Rule rule,
      Upstream upstream,
      RepositoryName name,
      Reference reference,
      Mono<ManifestResult> lookup) {
    String what =
        upstream.key()
            + "/"
            + name
            + (reference instanceof Reference.ByDigest ? "@" : ":")
            + reference;
    if (reference instanceof Reference.ByDigest byDigest
        && policy.refuses(rule, byDigest.digest())) {
      return Mono.error(policy.deny(rule, what, policy.known(byDigest.digest()).orElseThrow()));
    }
    return lookup.flatMap(
        result -> judge(rule, upstream, name, what, result.manifest()).thenReturn(result));
  }

  private Mono<Void> judge(
      Rule rule, Upstream upstream, RepositoryName name, String what, StoredManifest manifest) {
    Digest digest = manifest.digest();
    Optional<String> known = policy.known(digest);
    if (known.isPresent()) {
      return Mono.fromRunnable(() -> policy.check(rule, what, known.get()));
    }
    if (manifest.mediaType().isIndex()) {
      return Mono.fromRunnable(
          () -> {
            policy.readIndex(digest, manifest.body());
            policy.check(rule, what, "");
          });
    }
    Optional<Digest> config = policy.imageConfig(digest, manifest.body());
    if (config.isEmpty()) {
      return Mono.fromRunnable(() -> policy.check(rule, what, ""));
    }
    return blobs
        .get(upstream, name, config.get())
        .flatMap(
            source ->
                DataBufferUtils.join(
                    source.read(0, -1, DefaultDataBufferFactory.sharedInstance), MAX_CONFIG_BYTES))
        .map(body -> BODY.decode(body, BYTE_ARRAY, null, null))
        .onErrorResume(DataBufferLimitException.class, e -> Mono.just(new byte[0]))
        // a manifest request answers with a manifest's error code, saying why
        .onErrorMap(
            e -> e instanceof OciException oci && oci.code() == OciErrorCode.BLOB_UNKNOWN,
            e ->
                OciException.manifestUnknown(
                    what
                        + ": its image config "
                        + config.get()
                        + " is not to be had ("
                        + e.getMessage()
                        + "), so policy platforms="
                        + rule.platforms()
                        + " cannot tell its platform"))
        .doOnNext(bytes -> policy.check(rule, what, policy.readConfig(digest, bytes).orElse(null)))
        .then();
  }
}
