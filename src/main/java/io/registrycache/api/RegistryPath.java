package io.registrycache.api;

import io.registrycache.oci.OciErrorCode;
import io.registrycache.oci.OciException;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * A request path below {@code /v2/}, split into the repository part (still raw: it may start with
 * a registry host) and the endpoint (OCI Distribution Spec v1.1, "API" table). Names may have any
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

  // DOTALL: a name with CR/LF must reach name validation (NAME_INVALID), not fall through as
  // NAME_UNKNOWN.
  private static final Pattern MANIFEST = Pattern.compile("(.+)/manifests/([^/]+)", Pattern.DOTALL);
  private static final Pattern BLOB_UPLOAD = Pattern.compile("(.+)/blobs/uploads(?:/.*)?", Pattern.DOTALL);
  private static final Pattern BLOB = Pattern.compile("(.+)/blobs/([^/]+)", Pattern.DOTALL);
  private static final Pattern TAGS = Pattern.compile("(.+)/tags/list", Pattern.DOTALL);
  private static final Pattern REFERRERS = Pattern.compile("(.+)/referrers/([^/]+)", Pattern.DOTALL);

  /**
   * Parses the part of the path after {@code /v2/} (already percent-decoded).
   *
   * @throws OciException {@code NAME_UNKNOWN} (404) when no endpoint matches
   */
  public static RegistryPath parse(String path) {
    Matcher m;
    if ((m = BLOB_UPLOAD.matcher(path)).matches()) {
      return new RegistryPath(m.group(1), Endpoint.BLOB_UPLOAD, null);
    }
    if ((m = MANIFEST.matcher(path)).matches()) {
      return new RegistryPath(m.group(1), Endpoint.MANIFEST, m.group(2));
    }
    if ((m = BLOB.matcher(path)).matches()) {
      return new RegistryPath(m.group(1), Endpoint.BLOB, m.group(2));
    }
    if ((m = TAGS.matcher(path)).matches()) {
      return new RegistryPath(m.group(1), Endpoint.TAGS, null);
    }
    if ((m = REFERRERS.matcher(path)).matches()) {
      return new RegistryPath(m.group(1), Endpoint.REFERRERS, m.group(2));
    }
    throw new OciException(OciErrorCode.NAME_UNKNOWN, "no registry endpoint at /v2/" + path);
  }
}
