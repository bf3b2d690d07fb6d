package io.registrycache.upstream;

import io.registrycache.oci.Digest;
import io.registrycache.oci.MediaTypes;
import io.registrycache.oci.OciErrorCode;
import io.registrycache.oci.OciException;
import io.registrycache.oci.Reference;
import io.registrycache.oci.RepositoryName;
import io.registrycache.upstream.UpstreamCaller.Request;
import java.net.URI;
import java.util.List;
import org.springframework.core.ResolvableType;
import org.springframework.core.codec.ByteArrayDecoder;
import org.springframework.core.io.buffer.DataBufferLimitException;
import org.springframework.core.io.buffer.DataBufferUtils;
import org.springframework.http.HttpHeaders;
import org.springframework.http.HttpStatus;
import reactor.core.publisher.Mono;

/**
 * {@code GET} and {@code HEAD /v2/<name>/manifests/<reference>} (OCI distribution-spec, "Pulling
 * manifests"), through the {@link UpstreamCaller}.
 */
final class ManifestPuller {

  // A joined body's bytes: Spring's decoder copies them out and releases the buffer.
  private static final ByteArrayDecoder BODY = new ByteArrayDecoder();
  private static final ResolvableType BYTE_ARRAY = ResolvableType.forClass(byte[].class);

  private final UpstreamCaller caller;

  ManifestPuller(UpstreamCaller caller) {
    this.caller = caller;
  }

  /**
   * The manifest's bytes (at most {@code maxBytes}), media type and announced digest.
   *
   * @return errors {@code MANIFEST_UNKNOWN} (404), {@code MANIFEST_INVALID} above {@code maxBytes},
   *     else as {@link UpstreamErrors}
   */
  Mono<UpstreamManifest> get(
      Upstream upstream,
      RepositoryName name,
      Reference reference,
      List<String> accept,
      int maxBytes) {
    String what = "manifest " + describe(name, reference);
    URI uri = UpstreamCaller.uri(upstream, name, "manifests", reference.toString());
    return caller.call(
        upstream,
        "manifest",
        what,
        Request.get(uri, name, accept),
        reply -> {
          if (!reply.ok()) {
            return caller.failure(upstream, what, OciErrorCode.MANIFEST_UNKNOWN, reply);
          }
          long declared = reply.headers().getContentLength();
          if (declared > maxBytes) {
            return UpstreamCaller.drain(reply)
                .then(Mono.error(tooLarge(upstream, what, declared + " bytes", maxBytes)));
          }
          Digest digest;
          try {
            digest = upstreamDigest(upstream, what, reply.headers());
          } catch (UpstreamException e) {
            return UpstreamCaller.drain(reply).then(Mono.error(e));
          }
          String mediaType = mediaType(reply.headers());
          // join(…, max) stops reading and cancels as soon as the limit is passed.
          return DataBufferUtils.join(reply.body(), maxBytes)
              .map(body -> BODY.decode(body, BYTE_ARRAY, null, null))
              .defaultIfEmpty(new byte[0])
              .onErrorMap(
                  DataBufferLimitException.class,
                  e -> tooLarge(upstream, what, "more than " + maxBytes + " bytes", maxBytes))
              .map(body -> new UpstreamManifest(body, mediaType, digest));
        });
  }

  /** The manifest's digest, media type and size without its body; errors as {@link #get}. */
  Mono<UpstreamManifestHead> head(
      Upstream upstream, RepositoryName name, Reference reference, List<String> accept) {
    String what = "manifest " + describe(name, reference);
    URI uri = UpstreamCaller.uri(upstream, name, "manifests", reference.toString());
    return caller.call(
        upstream,
        "manifest",
        what,
        Request.head(uri, name, accept),
        reply -> {
          if (!reply.ok()) {
            return caller.failure(upstream, what, OciErrorCode.MANIFEST_UNKNOWN, reply);
          }
          return UpstreamCaller.drain(reply)
              .then(
                  Mono.fromCallable(
                      () ->
                          new UpstreamManifestHead(
                              upstreamDigest(upstream, what, reply.headers()),
                              mediaType(reply.headers()),
                              reply.headers().getContentLength())));
        });
  }

  private static UpstreamException tooLarge(
      Upstream upstream, String what, String size, int maxBytes) {
    return new UpstreamException(
        upstream.key(),
        OciErrorCode.MANIFEST_INVALID,
        HttpStatus.BAD_GATEWAY,
        UpstreamErrors.name(upstream)
            + ": "
            + what
            + " is "
            + size
            + ", above the limit of "
            + maxBytes
            + " bytes (registry-cache.manifests.max-size-bytes)",
        null,
        null);
  }

  /**
   * The upstream's {@code Docker-Content-Digest}, or {@code null} when absent.
   *
   * @throws UpstreamException {@code UPSTREAM_UNAVAILABLE} (502) when it is malformed
   */
  private static Digest upstreamDigest(Upstream upstream, String what, HttpHeaders headers) {
    String value = headers.getFirst("Docker-Content-Digest");
    if (value == null || value.isBlank()) {
      return null;
    }
    try {
      return Digest.parse(value.trim());
    } catch (OciException e) {
      throw UpstreamErrors.unavailable(
          upstream, "upstream sent an invalid digest for " + what + " (" + e.getMessage() + ")", e);
    }
  }

  /** The media type of {@code Content-Type} without parameters. */
  private static String mediaType(HttpHeaders headers) {
    return MediaTypes.essence(headers.getFirst(HttpHeaders.CONTENT_TYPE));
  }

  /** {@code name:tag} or {@code name@digest}, for messages. */
  private static String describe(RepositoryName name, Reference reference) {
    return name + (reference instanceof Reference.ByDigest ? "@" : ":") + reference;
  }
}
