package io.registrycache.api;

import io.registrycache.oci.OciErrorCode;
import io.registrycache.oci.OciException;

/**
 * A request path below {@code /v2/}, split into the repository part (still raw: it may start with a
 * registry host) and the endpoint (OCI Distribution Spec v1.1, "API" table). Names may have any
 * number of components, so endpoints are matched from the end of the path.
 *
 * @param rawName everything before the endpoint, e.g. {@code localhost:5000/library/alpine}
 * @param endpoint which endpoint
 * @param reference tag or digest for manifests, digest for blobs, {@code null} otherwise
 */
public record RegistryPath(String rawName, Endpoint endpoint, String reference) {

  /** The endpoints below {@code /v2/<name>/}. */
  public enum Endpoint {
    MANIFEST,
    BLOB,
    BLOB_UPLOAD,
    TAGS,
    REFERRERS
  }

  public static RegistryPath parse(String path) {
    // Matched from the end by hand (this runs for every request), as the regular expressions
    // "(.+)/blobs/uploads(/.*)?", "(.+)/manifests/([^/]+)", "(.+)/blobs/([^/]+)", "(.+)/tags/list",
    // "(.+)/referrers/([^/]+)" would, in that order, with '.' matching any character (a name with
    // CR/LF must reach name validation, NAME_INVALID, not fall through as NAME_UNKNOWN).
    // RegistryPathTest checks the equivalence against those expressions.
    int upload = uploadEndpoint(path);
    if (upload > 0) {
      return new RegistryPath(path.substring(0, upload), Endpoint.BLOB_UPLOAD, null);
    }
    int slash = path.lastIndexOf('/');
    if (slash >= 0 && slash < path.length() - 1) {
      String last = path.substring(slash + 1);
      if (endsWithSegment(path, slash, "/manifests")) {
        return new RegistryPath(
            path.substring(0, slash - "/manifests".length()), Endpoint.MANIFEST, last);
      }
      if (endsWithSegment(path, slash, "/blobs")) {
        return new RegistryPath(path.substring(0, slash - "/blobs".length()), Endpoint.BLOB, last);
      }
      if (last.equals("list") && endsWithSegment(path, slash, "/tags")) {
        return new RegistryPath(path.substring(0, slash - "/tags".length()), Endpoint.TAGS, null);
      }
      if (endsWithSegment(path, slash, "/referrers")) {
        return new RegistryPath(
            path.substring(0, slash - "/referrers".length()), Endpoint.REFERRERS, last);
      }
    }
    throw new OciException(OciErrorCode.NAME_UNKNOWN, "no registry endpoint at /v2/" + path);
  }

  /**
   * Whether {@code path[0, end)} ends with {@code segment} and has at least one character before
   * it.
   */
  private static boolean endsWithSegment(String path, int end, String segment) {
    int start = end - segment.length();
    return start > 0 && path.startsWith(segment, start);
  }

  /**
   * Where the name ends before the last {@code /blobs/uploads} that ends the path or is followed by
   * {@code /}, with at least one character before it (what {@code (.+)/blobs/uploads(/.*)?}
   * matches); -1 when there is none.
   */
  private static int uploadEndpoint(String path) {
    String token = "/blobs/uploads";
    for (int i = path.lastIndexOf(token); i > 0; i = path.lastIndexOf(token, i - 1)) {
      int after = i + token.length();
      if (after == path.length() || path.charAt(after) == '/') {
        return i;
      }
    }
    return -1;
  }
}
