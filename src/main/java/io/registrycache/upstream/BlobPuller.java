package io.registrycache.upstream;

import io.registrycache.oci.Digest;
import io.registrycache.oci.OciErrorCode;
import io.registrycache.oci.OciException;
import io.registrycache.oci.RepositoryName;
import io.registrycache.upstream.UpstreamCaller.Reply;
import io.registrycache.upstream.UpstreamCaller.Request;
import java.net.URI;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.springframework.core.io.buffer.DataBuffer;
import org.springframework.http.HttpHeaders;
import org.springframework.http.HttpMethod;
import reactor.core.publisher.Flux;
import reactor.core.publisher.Mono;

/**
 * {@code GET} (whole, or from a byte with {@code Range}) and {@code HEAD /v2/<name>/blobs/<digest>}
 * (OCI distribution-spec, "Pulling blobs"), through the {@link UpstreamCaller}. The body's bytes
 * are counted in {@code registry.cache.upstream.fetched.bytes}.
 */
final class BlobPuller {

  private final UpstreamCaller caller;

  BlobPuller(UpstreamCaller caller) {
    this.caller = caller;
  }

  /**
   * The blob from byte {@code offset} (0: whole): its size and body. Errors: {@code BLOB_UNKNOWN}
   * (404), {@code UPSTREAM_UNAVAILABLE} (502) when a ranged answer does not start at {@code
   * offset}, else as {@link UpstreamErrors}; a body cut off fails its {@code Flux}.
   */
  Mono<UpstreamBlob> get(Upstream upstream, RepositoryName name, Digest digest, long offset) {
    String what = "blob " + name + "@" + digest + (offset > 0 ? " from byte " + offset : "");
    URI uri = UpstreamCaller.uri(upstream, name, "blobs", digest.toString());
    String range = offset > 0 ? "bytes=" + offset + "-" : null;
    return caller.call(
        upstream,
        "blob",
        what,
        new Request(HttpMethod.GET, uri, name, null, range),
        reply -> {
          if (!reply.ok()) {
            return caller.failure(upstream, what, OciErrorCode.BLOB_UNKNOWN, reply);
          }
          Flux<DataBuffer> body =
              caller
                  .metrics()
                  .countBytes(upstream, reply.body())
                  .onErrorMap(
                      e -> !(e instanceof OciException),
                      e -> UpstreamErrors.fromTransport(upstream, what, e));
          if (offset <= 0) {
            return Mono.just(new UpstreamBlob(reply.headers().getContentLength(), body));
          }
          return resumed(upstream, what, offset, reply, body);
        });
  }

  /** The blob's size without its body; errors as {@link #get}. */
  Mono<Long> head(Upstream upstream, RepositoryName name, Digest digest) {
    String what = "blob " + name + "@" + digest;
    URI uri = UpstreamCaller.uri(upstream, name, "blobs", digest.toString());
    return caller.call(
        upstream,
        "blob",
        what,
        Request.head(uri, name, null),
        reply -> {
          if (!reply.ok()) {
            return caller.failure(upstream, what, OciErrorCode.BLOB_UNKNOWN, reply);
          }
          return UpstreamCaller.drain(reply).thenReturn(reply.headers().getContentLength());
        });
  }

  /**
   * The rest of a blob from {@code offset}: a {@code 206} whose {@code Content-Range} starts there,
   * or a {@code 200} (the range ignored) whose first {@code offset} bytes are skipped. Anything
   * else is {@code UPSTREAM_UNAVAILABLE} (502).
   */
  private Mono<UpstreamBlob> resumed(
      Upstream upstream, String what, long offset, Reply reply, Flux<DataBuffer> body) {
    if (reply.status() == 200) {
      caller.metrics().resumed(upstream, false);
      return Mono.just(
          new UpstreamBlob(reply.headers().getContentLength(), UpstreamBlob.skip(body, offset)));
    }
    ContentRange range = ContentRange.parse(reply.headers().getFirst(HttpHeaders.CONTENT_RANGE));
    if (reply.status() != 206 || range == null || range.first() != offset) {
      return UpstreamCaller.drain(reply)
          .then(
              Mono.error(
                  UpstreamErrors.unavailable(
                      upstream,
                      what
                          + ": answered "
                          + reply.status()
                          + " with Content-Range "
                          + reply.headers().getFirst(HttpHeaders.CONTENT_RANGE),
                      null)));
    }
    caller.metrics().resumed(upstream, true);
    return Mono.just(new UpstreamBlob(range.total(), body));
  }

  /**
   * {@code Content-Range: bytes <first>-<last>/<total>} (RFC 9110 14.4); total -1 for {@code *}.
   */
  record ContentRange(long first, long last, long total) {
    private static final Pattern SYNTAX =
        Pattern.compile("\\s*bytes\\s+(\\d+)-(\\d+)/(\\d+|\\*)\\s*");

    static ContentRange parse(String header) {
      if (header == null) {
        return null;
      }
      Matcher m = SYNTAX.matcher(header);
      if (!m.matches()) {
        return null;
      }
      try {
        long total = m.group(3).equals("*") ? -1 : Long.parseLong(m.group(3));
        return new ContentRange(Long.parseLong(m.group(1)), Long.parseLong(m.group(2)), total);
      } catch (NumberFormatException e) {
        return null;
      }
    }
  }
}
