package io.registrycache.signature;

import io.registrycache.oci.Digest;
import io.registrycache.oci.Json;
import io.registrycache.oci.MediaTypes;
import io.registrycache.oci.OciException;
import io.registrycache.oci.Reference;
import io.registrycache.oci.RepositoryName;
import io.registrycache.signature.SignatureVerdict.Reason;
import io.registrycache.signature.SignatureVerdict.Refused;
import io.registrycache.signature.SignatureVerdict.Verified;
import io.registrycache.upstream.Upstream;
import io.registrycache.upstream.UpstreamClient;
import io.registrycache.upstream.UpstreamException;
import io.registrycache.upstream.UpstreamReferrers;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Base64;
import java.util.Comparator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import org.springframework.core.ResolvableType;
import org.springframework.core.codec.ByteArrayDecoder;
import org.springframework.core.io.buffer.DataBufferLimitException;
import org.springframework.core.io.buffer.DataBufferUtils;
import reactor.core.publisher.Flux;
import reactor.core.publisher.Mono;
import tools.jackson.core.JacksonException;
import tools.jackson.databind.JsonNode;

/**
 * Checks an image's key-signed cosign signatures at its upstream (cosign's signature format,
 * "Simple Signing"): finds the signature manifests, and verifies each signature layer with the
 * configured {@link SigningKeys}.
 *
 * <p>Signature manifests are found in two places, both asked:
 *
 * <ul>
 *   <li>the cosign tag scheme: tag {@code <alg>-<hex>.sig} of the image's repository, which {@code
 *       cosign sign} writes by default;
 *   <li>the referrers of the image (OCI Distribution Spec v1.1, "Listing Referrers") whose {@code
 *       artifactType} is {@value #SIGNATURE_ARTIFACT}, as cosign 2's {@code cosign sign
 *       --registry-referrers-mode=oci-1-1} writes them, or a Sigstore bundle ({@value
 *       #BUNDLE_PREFIX}{@code .v0.3+json}), as cosign 3's {@code cosign sign} writes them by
 *       default; from an upstream without the referrers API, the referrers tag schema ({@code
 *       <alg>-<hex>}, an image index) is read instead.
 * </ul>
 *
 * <p>A signature layer ({@value #SIMPLE_SIGNING}) verifies when all of these hold: its payload
 * blob's bytes have the layer descriptor's digest and size; its annotation {@value
 * #SIGNATURE_ANNOTATION} (base64) is a signature over exactly those bytes by one of the keys; the
 * payload is a cosign signature payload ({@code critical.type} {@value #PAYLOAD_TYPE}) whose {@code
 * critical.image.docker-manifest-digest} is the image's digest. A Sigstore bundle layer verifies
 * when its bytes have the descriptor's digest and size, and its DSSE envelope has a signature by
 * one of the keys over the envelope's pre-authentication encoding, with payload type {@value
 * #IN_TOTO}: an in-toto statement of predicate type {@value #SIGN_PREDICATE} with the image among
 * its subjects. One layer that verifies is enough.
 *
 * <p>Not checked: the payload's {@code docker-reference} and {@code optional} claims, transparency
 * log entries ({@code dev.sigstore.cosign/bundle}, a bundle's {@code verificationMaterial}) and
 * timestamps, certificates (keyless signatures), attestations other than cosign 3's signature
 * statement.
 *
 * <p>Bounds, so an upstream cannot make a check expensive: {@value #MAX_SIGNATURE_MANIFESTS}
 * signature manifests from the referrers, {@value #MAX_LAYERS} layers per manifest, {@value
 * #MAX_REFERRER_PAGES} referrers pages, manifests of at most {@value #MAX_MANIFEST_BYTES} bytes,
 * payloads of at most {@value #MAX_PAYLOAD_BYTES} bytes. Signatures are checked one after another
 * and the check stops at the first that verifies.
 */
public final class SignatureVerifier {

  // A joined body's bytes: Spring's decoder copies them out and releases the buffer.
  private static final ByteArrayDecoder BODY = new ByteArrayDecoder();
  private static final ResolvableType BYTE_ARRAY = ResolvableType.forClass(byte[].class);

  /** {@code artifactType} of cosign's signature manifests among the referrers. */
  public static final String SIGNATURE_ARTIFACT = "application/vnd.dev.cosign.artifact.sig.v1+json";

  /** Media type of a signature layer: the simple-signing payload blob. */
  public static final String SIMPLE_SIGNING = "application/vnd.dev.cosign.simplesigning.v1+json";

  /** Layer annotation holding the base64 signature over the payload. */
  public static final String SIGNATURE_ANNOTATION = "dev.cosignproject.cosign/signature";

  /** {@code critical.type} of a cosign image signature payload (sigstore's payload package). */
  public static final String PAYLOAD_TYPE = "cosign container image signature";

  /**
   * Media type (and referrers {@code artifactType}) of a Sigstore bundle, up to its version: cosign
   * 3 writes {@code application/vnd.dev.sigstore.bundle.v0.3+json}.
   */
  public static final String BUNDLE_PREFIX = "application/vnd.dev.sigstore.bundle";

  /** DSSE payload type of an in-toto statement. */
  public static final String IN_TOTO = "application/vnd.in-toto+json";

  /** in-toto predicate type of cosign 3's image signatures. */
  public static final String SIGN_PREDICATE = "https://sigstore.dev/cosign/sign/v1";

  static final int MAX_MANIFEST_BYTES = 1024 * 1024;
  static final int MAX_PAYLOAD_BYTES = 256 * 1024;
  static final int MAX_SIGNATURE_MANIFESTS = 16;
  static final int MAX_LAYERS = 16;
  static final int MAX_REFERRER_PAGES = 16;

  private static final List<String> MANIFEST_TYPES =
      List.of(MediaTypes.OCI_MANIFEST, MediaTypes.DOCKER_MANIFEST);

  private final UpstreamClient upstreams;
  private final SigningKeys keys;

  /**
   * @param upstreams where manifests, blobs and referrers are fetched
   * @param keys the keys a signature may be made with
   */
  public SignatureVerifier(UpstreamClient upstreams, SigningKeys keys) {
    this.upstreams = upstreams;
    this.keys = keys;
  }

  /**
   * With the keys of PEM files ({@link SigningKeys#load}).
   *
   * @throws IllegalArgumentException naming a key file that cannot be used, and why
   */
  public SignatureVerifier(UpstreamClient upstreams, List<Path> keyFiles) {
    this(upstreams, SigningKeys.load(keyFiles));
  }

  /** The keys signatures are checked with. */
  public SigningKeys keys() {
    return keys;
  }

  /**
   * Whether the image {@code image} in repository {@code name} of {@code upstream} has a key-signed
   * cosign signature by one of the keys.
   *
   * @param name the repository name as the upstream knows it (canonical)
   * @param image the digest of the image's manifest or index, as signed
   * @return {@link Verified} with the key, or {@link Refused} with the reason; never an error for
   *     what the upstream answers or fails with
   */
  public Mono<SignatureVerdict> verify(Upstream upstream, RepositoryName name, Digest image) {
    return Mono.zip(fromTag(upstream, name, image), fromReferrers(upstream, name, image))
        .flatMap(
            found -> {
              Found all = found.getT1().and(found.getT2());
              return Flux.fromIterable(all.manifests().values())
                  .concatMap(manifest -> check(upstream, name, image, manifest))
                  .takeUntil(Verified.class::isInstance)
                  .collectList()
                  .map(outcomes -> decide(image, outcomes, all.failures()));
            });
  }

  /** The signature manifest under the cosign tag {@code <alg>-<hex>.sig}, if there is one. */
  private Mono<Found> fromTag(Upstream upstream, RepositoryName name, Digest image) {
    Reference.Tag tag;
    try {
      tag = new Reference.Tag(image.algorithm() + "-" + image.hex() + ".sig");
    } catch (OciException tooLong) {
      return Mono.just(Found.NOTHING); // sha512: the tag would pass the 128 characters of a tag
    }
    String where = "tag " + tag.name();
    return upstreams
        .getManifest(upstream, name, tag, MANIFEST_TYPES, MAX_MANIFEST_BYTES)
        .map(m -> Found.manifest(new SignatureManifest(Digest.sha256(m.body()), m.body(), where)))
        .onErrorResume(
            OciException.class,
            e -> Mono.just(notFound(e) ? Found.NOTHING : Found.failure(fetchFailed(where, e))));
  }

  /** The signature manifests among the image's referrers. */
  private Mono<Found> fromReferrers(Upstream upstream, RepositoryName name, Digest image) {
    String where = "referrers of " + image;
    return upstreams
        .listReferrers(upstream, name, image, null)
        .expand(
            page ->
                page.next() == null
                    ? Mono.empty()
                    : upstreams.listReferrers(upstream, name, image, page.next()))
        .take(MAX_REFERRER_PAGES)
        .map(UpstreamReferrers::body)
        .collectList()
        .map(pages -> Listing.of(where, pages))
        .onErrorResume(
            OciException.class,
            e ->
                notFound(e)
                    ? fromReferrersTag(upstream, name, image)
                    : Mono.just(Listing.failure(fetchFailed(where, e))))
        .flatMap(listing -> fetchListed(upstream, name, listing));
  }

  /** Without the referrers API: the referrers tag schema's index under tag {@code <alg>-<hex>}. */
  private Mono<Listing> fromReferrersTag(Upstream upstream, RepositoryName name, Digest image) {
    Reference.Tag tag = new Reference.Tag(image.algorithm() + "-" + image.hex());
    String where = "referrers tag " + tag.name();
    return upstreams
        .getManifest(upstream, name, tag, List.of(MediaTypes.OCI_INDEX), MAX_MANIFEST_BYTES)
        .map(m -> Listing.of(where, List.of(m.body())))
        .onErrorResume(
            OciException.class,
            e -> Mono.just(notFound(e) ? Listing.NOTHING : Listing.failure(fetchFailed(where, e))));
  }

  /** Fetches the listed signature manifests by digest, each checked against its digest. */
  private Mono<Found> fetchListed(Upstream upstream, RepositoryName name, Listing listing) {
    Found start = new Found(Map.of(), listing.failures());
    return Flux.fromIterable(listing.signatures())
        .take(MAX_SIGNATURE_MANIFESTS)
        .concatMap(
            digest -> {
              String where = "signature manifest " + digest + " (a referrer)";
              return upstreams
                  .getManifest(
                      upstream,
                      name,
                      new Reference.ByDigest(digest),
                      MANIFEST_TYPES,
                      MAX_MANIFEST_BYTES)
                  .map(
                      m ->
                          digest.recompute(m.body()).equals(digest)
                              ? Found.manifest(new SignatureManifest(digest, m.body(), where))
                              : Found.failure(
                                  new Refused(
                                      Reason.BAD_SIGNATURE,
                                      where + ": the upstream's bytes have another digest")))
                  .onErrorResume(
                      OciException.class, e -> Mono.just(Found.failure(fetchFailed(where, e))));
            })
        .reduce(start, Found::and);
  }

  /** The outcome of each signature layer of {@code manifest}, up to the first that verifies. */
  private Flux<SignatureVerdict> check(
      Upstream upstream, RepositoryName name, Digest image, SignatureManifest manifest) {
    String where = "signature manifest " + manifest.digest() + " (" + manifest.where() + ")";
    List<JsonNode> layers = new ArrayList<>();
    try {
      JsonNode all = Json.MAPPER.readTree(manifest.body()).path("layers");
      all.forEach(
          layer -> {
            String type = layer.path("mediaType").asString("");
            if (SIMPLE_SIGNING.equals(type) || type.startsWith(BUNDLE_PREFIX)) {
              layers.add(layer);
            }
          });
    } catch (JacksonException e) {
      return Flux.just(new Refused(Reason.BAD_SIGNATURE, where + " is not JSON"));
    }
    if (layers.isEmpty()) {
      return Flux.just(
          new Refused(
              Reason.BAD_SIGNATURE,
              where + " holds no " + SIMPLE_SIGNING + " or Sigstore bundle layer"));
    }
    return Flux.fromIterable(layers)
        .take(MAX_LAYERS)
        .concatMap(layer -> checkLayer(upstream, name, image, manifest.digest(), where, layer));
  }

  /** One layer: a simple-signing payload with its signature annotation, or a Sigstore bundle. */
  private Mono<SignatureVerdict> checkLayer(
      Upstream upstream,
      RepositoryName name,
      Digest image,
      Digest manifestDigest,
      String where,
      JsonNode layer) {
    boolean bundle = !SIMPLE_SIGNING.equals(layer.path("mediaType").asString(""));
    byte[] signature;
    Digest blobDigest;
    try {
      String encoded = layer.path("annotations").path(SIGNATURE_ANNOTATION).asString(null);
      if (encoded == null && !bundle) {
        return bad(where + ": a layer has no " + SIGNATURE_ANNOTATION + " annotation");
      }
      signature = bundle ? null : Base64.getDecoder().decode(encoded);
      blobDigest = Digest.parse(layer.path("digest").asString(null));
    } catch (IllegalArgumentException | OciException e) {
      return bad(where + ": a layer's signature or digest is malformed: " + e.getMessage());
    }
    long size = layer.path("size").asLong(-1);
    if (size < 0 || size > MAX_PAYLOAD_BYTES) {
      return bad(where + ": blob size " + size + " is not in 0.." + MAX_PAYLOAD_BYTES + " bytes");
    }
    String blobWhere = where + ": " + (bundle ? "bundle " : "payload ") + blobDigest;
    return upstreams
        .getBlob(upstream, name, blobDigest)
        .flatMap(blob -> DataBufferUtils.join(blob.body(), MAX_PAYLOAD_BYTES))
        .map(body -> BODY.decode(body, BYTE_ARRAY, null, null))
        .defaultIfEmpty(new byte[0])
        .map(
            bytes -> {
              if (bytes.length != size || !blobDigest.recompute(bytes).equals(blobDigest)) {
                return new Refused(
                    Reason.BAD_SIGNATURE, blobWhere + ": the bytes do not have that digest");
              }
              return bundle
                  ? checkBundle(bytes, image, manifestDigest, where, blobWhere)
                  : checkSimpleSigning(bytes, signature, image, manifestDigest, where, blobWhere);
            })
        .onErrorResume(
            DataBufferLimitException.class,
            e -> bad(blobWhere + ": more than " + MAX_PAYLOAD_BYTES + " bytes"))
        .onErrorResume(OciException.class, e -> Mono.just(fetchFailed(blobWhere, e)));
  }

  private SignatureVerdict checkSimpleSigning(
      byte[] payload,
      byte[] signature,
      Digest image,
      Digest manifestDigest,
      String where,
      String payloadWhere) {
    Optional<SigningKey> signer = keys.signer(payload, signature);
    if (signer.isEmpty()) {
      return wrongKey(where);
    }
    return claim(payload, image, payloadWhere)
        .<SignatureVerdict>map(why -> new Refused(Reason.BAD_SIGNATURE, why))
        .orElseGet(() -> new Verified(signer.get().name(), manifestDigest));
  }

  /**
   * A Sigstore bundle ({@code cosign sign} of cosign 3): a DSSE envelope whose signature is over
   * the envelope's pre-authentication encoding (DSSE v1, "Protocol"), holding an in-toto statement
   * with predicate type {@value #SIGN_PREDICATE} whose subject is the image.
   */
  private SignatureVerdict checkBundle(
      byte[] bundle, Digest image, Digest manifestDigest, String where, String bundleWhere) {
    String payloadType;
    byte[] payload;
    List<byte[]> signatures = new ArrayList<>();
    try {
      JsonNode envelope = Json.MAPPER.readTree(bundle).path("dsseEnvelope");
      if (!envelope.isObject()) {
        return new Refused(Reason.BAD_SIGNATURE, bundleWhere + " holds no DSSE envelope");
      }
      payloadType = envelope.path("payloadType").asString("");
      payload = Base64.getDecoder().decode(envelope.path("payload").asString(""));
      for (JsonNode sig : envelope.path("signatures")) {
        signatures.add(Base64.getDecoder().decode(sig.path("sig").asString("")));
      }
    } catch (JacksonException | IllegalArgumentException e) {
      return new Refused(Reason.BAD_SIGNATURE, bundleWhere + " is not a readable bundle");
    }
    byte[] signed = preAuthenticationEncoding(payloadType, payload);
    Optional<SigningKey> signer =
        signatures.stream()
            .map(sig -> keys.signer(signed, sig))
            .flatMap(Optional::stream)
            .findFirst();
    if (signer.isEmpty()) {
      return wrongKey(where);
    }
    return statementClaim(payloadType, payload, image, bundleWhere)
        .<SignatureVerdict>map(why -> new Refused(Reason.BAD_SIGNATURE, why))
        .orElseGet(() -> new Verified(signer.get().name(), manifestDigest));
  }

  /**
   * DSSE v1's PAE: {@code "DSSEv1" SP LEN(type) SP type SP LEN(body) SP body}, lengths in ASCII
   * decimal bytes.
   */
  static byte[] preAuthenticationEncoding(String payloadType, byte[] payload) {
    byte[] type = payloadType.getBytes(StandardCharsets.UTF_8);
    byte[] head =
        ("DSSEv1 " + type.length + " " + payloadType + " " + payload.length + " ")
            .getBytes(StandardCharsets.UTF_8);
    byte[] out = Arrays.copyOf(head, head.length + payload.length);
    System.arraycopy(payload, 0, out, head.length, payload.length);
    return out;
  }

  /** Why a signed in-toto statement does not sign {@code image} as cosign does, or empty. */
  private static Optional<String> statementClaim(
      String payloadType, byte[] payload, Digest image, String where) {
    if (!IN_TOTO.equals(payloadType)) {
      return Optional.of(where + " has payload type " + payloadType + ", not " + IN_TOTO);
    }
    JsonNode statement;
    try {
      statement = Json.MAPPER.readTree(payload);
    } catch (JacksonException e) {
      return Optional.of(where + ": the statement is not JSON");
    }
    String predicate = statement.path("predicateType").asString(null);
    if (!SIGN_PREDICATE.equals(predicate)) {
      return Optional.of(where + " has predicate type " + predicate + ", not " + SIGN_PREDICATE);
    }
    List<String> subjects = new ArrayList<>();
    for (JsonNode subject : statement.path("subject")) {
      String hex = subject.path("digest").path(image.algorithm()).asString(null);
      if (image.hex().equals(hex)) {
        return Optional.empty();
      }
      subjects.add(image.algorithm() + ":" + hex);
    }
    return Optional.of(where + " signs " + subjects + ", not " + image);
  }

  private SignatureVerdict wrongKey(String where) {
    return new Refused(
        Reason.WRONG_KEY, where + ": the signature verifies with none of the keys " + keyNames());
  }

  /** Why the signed payload does not sign {@code image} as cosign does, or empty when it does. */
  private static Optional<String> claim(byte[] payload, Digest image, String where) {
    JsonNode critical;
    try {
      critical = Json.MAPPER.readTree(payload).path("critical");
    } catch (JacksonException e) {
      return Optional.of(where + " is not JSON");
    }
    String type = critical.path("type").asString(null);
    if (!PAYLOAD_TYPE.equals(type)) {
      return Optional.of(where + " has critical.type " + type + ", not " + PAYLOAD_TYPE);
    }
    String signed = critical.path("image").path("docker-manifest-digest").asString(null);
    if (!image.toString().equals(signed)) {
      return Optional.of(where + " signs image " + signed + ", not " + image);
    }
    return Optional.empty();
  }

  /** A verified outcome if there is one, else the refusal that comes first by reason. */
  private static SignatureVerdict decide(
      Digest image, List<SignatureVerdict> outcomes, List<Refused> failures) {
    List<Refused> refusals = new ArrayList<>(failures);
    for (SignatureVerdict outcome : outcomes) {
      switch (outcome) {
        case Verified verified -> {
          return verified;
        }
        case Refused refused -> refusals.add(refused);
      }
    }
    if (refusals.isEmpty()) {
      return new Refused(
          Reason.NO_SIGNATURE,
          "no cosign signature of "
              + image
              + " under tag "
              + image.algorithm()
              + "-"
              + image.hex()
              + ".sig nor among its referrers");
    }
    Refused first = refusals.stream().min(Comparator.comparing(Refused::reason)).orElseThrow();
    int others = refusals.size() - 1;
    return others == 0
        ? first
        : new Refused(
            first.reason(),
            first.detail() + "; " + others + " other signature check(s) failed too");
  }

  private String keyNames() {
    return keys.keys().stream().map(SigningKey::name).toList().toString();
  }

  private static boolean notFound(OciException e) {
    return e instanceof UpstreamException u && u.isNotFound();
  }

  private static Refused fetchFailed(String where, OciException e) {
    return new Refused(Reason.FETCH_FAILED, where + ": " + e.getMessage());
  }

  private static Mono<SignatureVerdict> bad(String detail) {
    return Mono.just(new Refused(Reason.BAD_SIGNATURE, detail));
  }

  /** A signature manifest as fetched, and where it was found (for messages). */
  @SuppressWarnings("ArrayRecordComponent") // a carrier of bytes, never compared or hashed
  private record SignatureManifest(Digest digest, byte[] body, String where) {}

  /**
   * Signature manifests found (by digest, so one found both ways is checked once), and failures.
   */
  private record Found(Map<Digest, SignatureManifest> manifests, List<Refused> failures) {

    static final Found NOTHING = new Found(Map.of(), List.of());

    static Found manifest(SignatureManifest manifest) {
      return new Found(Map.of(manifest.digest(), manifest), List.of());
    }

    static Found failure(Refused failure) {
      return new Found(Map.of(), List.of(failure));
    }

    Found and(Found other) {
      Map<Digest, SignatureManifest> both = new LinkedHashMap<>(manifests);
      other.manifests.forEach(both::putIfAbsent);
      List<Refused> all = new ArrayList<>(failures);
      all.addAll(other.failures);
      return new Found(both, all);
    }
  }

  /** The digests of the signature manifests a referrers list names, and failures reading it. */
  private record Listing(List<Digest> signatures, List<Refused> failures) {

    static final Listing NOTHING = new Listing(List.of(), List.of());

    static Listing failure(Refused failure) {
      return new Listing(List.of(), List.of(failure));
    }

    /** The signature descriptors of image index bodies; a body that is not one is a failure. */
    static Listing of(String where, List<byte[]> indexes) {
      List<Digest> signatures = new ArrayList<>();
      List<Refused> failures = new ArrayList<>();
      for (byte[] index : indexes) {
        try {
          Json.MAPPER
              .readTree(index)
              .path("manifests")
              .forEach(
                  descriptor -> {
                    String type = descriptor.path("artifactType").asString("");
                    if (SIGNATURE_ARTIFACT.equals(type) || type.startsWith(BUNDLE_PREFIX)) {
                      try {
                        Digest digest = Digest.parse(descriptor.path("digest").asString(null));
                        if (!signatures.contains(digest)) {
                          signatures.add(digest);
                        }
                      } catch (OciException e) {
                        failures.add(
                            new Refused(
                                Reason.BAD_SIGNATURE,
                                where + ": a signature descriptor's digest is malformed"));
                      }
                    }
                  });
        } catch (JacksonException e) {
          failures.add(new Refused(Reason.FETCH_FAILED, where + ": not an image index"));
        }
      }
      return new Listing(signatures, failures);
    }
  }
}
