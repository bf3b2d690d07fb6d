package io.registrycache.testsupport;

import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.charset.StandardCharsets;
import java.security.SecureRandom;
import java.util.ArrayList;
import java.util.HexFormat;
import java.util.List;
import java.util.Random;
import java.util.UUID;
import java.util.stream.Collectors;
import java.util.stream.Stream;
import java.util.zip.GZIPOutputStream;

/**
 * Builds OCI and Docker images for tests: real (gzipped) tar layers, a config whose {@code
 * rootfs.diff_ids} match, and manifests kept as the exact bytes that are pushed, so a test can
 * compare what the cache serves byte for byte.
 *
 * <p>Content is deterministic for a given seed and unique per test run: every factory mixes a
 * run-wide random id into the seed, so a fresh run never finds its blobs already in a cache or an
 * upstream left over from an earlier one. Manifests are pretty-printed with an unusual 3-space
 * indentation and a trailing newline, so any re-serialization by the cache changes the bytes.
 */
public final class TestImages {

  public static final String OCI_INDEX = "application/vnd.oci.image.index.v1+json";
  public static final String OCI_MANIFEST = "application/vnd.oci.image.manifest.v1+json";
  public static final String OCI_CONFIG = "application/vnd.oci.image.config.v1+json";
  public static final String OCI_LAYER_GZIP = "application/vnd.oci.image.layer.v1.tar+gzip";
  public static final String OCI_LAYER_TAR = "application/vnd.oci.image.layer.v1.tar";
  public static final String DOCKER_MANIFEST =
      "application/vnd.docker.distribution.manifest.v2+json";
  public static final String DOCKER_CONFIG = "application/vnd.docker.container.image.v1+json";
  public static final String DOCKER_LAYER_GZIP =
      "application/vnd.docker.image.rootfs.diff.tar.gzip";

  /** Unique for this JVM: makes every run's content new to any cache or upstream. */
  public static final String RUN_ID = UUID.randomUUID().toString().substring(0, 8);

  private TestImages() {}

  /** A content-addressed blob (config or layer) with its descriptor media type. */
  public record Blob(String mediaType, byte[] bytes) {
    public String digest() {
      return Sha256.digest(bytes);
    }

    public long size() {
      return bytes.length;
    }

    public Descriptor descriptor() {
      return new Descriptor(mediaType, digest(), size());
    }
  }

  /** A manifest (image manifest or index) as the exact bytes pushed. */
  public record Manifest(String mediaType, byte[] bytes) {
    public String digest() {
      return Sha256.digest(bytes);
    }

    public long size() {
      return bytes.length;
    }

    public String text() {
      return new String(bytes, StandardCharsets.UTF_8);
    }

    public Descriptor descriptor() {
      return new Descriptor(mediaType, digest(), size());
    }
  }

  /** An OCI descriptor. */
  public record Descriptor(String mediaType, String digest, long size) {}

  /** An image: manifest, config, layers, and where it is (to be) pushed. */
  public record Image(
      String repository, String tag, Manifest manifest, Blob config, List<Blob> layers) {
    /** Config first, then layers. */
    public List<Blob> blobs() {
      return Stream.concat(Stream.of(config), layers.stream()).toList();
    }

    /** The biggest layer. */
    public Blob largestLayer() {
      return layers.stream().max((a, b) -> Long.compare(a.size(), b.size())).orElseThrow();
    }
  }

  /** One entry of an index. */
  public record PlatformImage(String os, String architecture, Image image) {}

  /** An OCI image index with one image manifest per platform. */
  public record ImageIndex(
      String repository, String tag, Manifest index, List<PlatformImage> platforms) {
    public PlatformImage platform(String architecture) {
      return platforms.stream()
          .filter(p -> p.architecture().equals(architecture))
          .findFirst()
          .orElseThrow();
    }
  }

  /** A repository name unique to this run: {@code it/<purpose>-<run id>}. */
  public static String uniqueRepository(String purpose) {
    return "it/" + purpose + "-" + RUN_ID + "-" + UUID.randomUUID().toString().substring(0, 4);
  }

  /** The JVM's architecture in OCI spelling ({@code amd64}, {@code arm64}, ...). */
  public static String hostArchitecture() {
    String arch = System.getProperty("os.arch");
    return switch (arch) {
      case "amd64", "x86_64" -> "amd64";
      case "aarch64", "arm64" -> "arm64";
      default -> arch;
    };
  }

  /** A small OCI image for the host platform: config + 2 gzipped tar layers (~6 KiB and ~1 KiB). */
  public static Image smallOci(String repository, String tag) {
    return smallImage(repository, tag, "linux", hostArchitecture(), false);
  }

  /** A small OCI image whose config names platform {@code os}/{@code architecture}. */
  public static Image smallOci(String repository, String tag, String os, String architecture) {
    return smallImage(repository, tag, os, architecture, false);
  }

  /** A small Docker schema2 image: config + 2 gzipped tar layers. */
  public static Image dockerSchema2(String repository, String tag) {
    return smallImage(repository, tag, "linux", hostArchitecture(), true);
  }

  /** An OCI image index for linux/amd64 and linux/arm64, each with its own manifest and layers. */
  public static ImageIndex index(String repository, String tag) {
    List<PlatformImage> platforms = new ArrayList<>();
    for (String arch : List.of("amd64", "arm64")) {
      Image image = smallImage(repository, tag + "-" + arch, "linux", arch, false);
      platforms.add(new PlatformImage("linux", arch, image));
    }
    String entries =
        platforms.stream()
            .map(
                p ->
                    "      {\n"
                        + "         \"mediaType\": \""
                        + OCI_MANIFEST
                        + "\",\n"
                        + "         \"digest\": \""
                        + p.image().manifest().digest()
                        + "\",\n"
                        + "         \"size\": "
                        + p.image().manifest().size()
                        + ",\n"
                        + "         \"platform\": {\n"
                        + "            \"architecture\": \""
                        + p.architecture()
                        + "\",\n"
                        + "            \"os\": \""
                        + p.os()
                        + "\"\n"
                        + "         }\n"
                        + "      }")
            .collect(Collectors.joining(",\n"));
    String json =
        "{\n"
            + "   \"schemaVersion\": 2,\n"
            + "   \"mediaType\": \""
            + OCI_INDEX
            + "\",\n"
            + "   \"manifests\": [\n"
            + entries
            + "\n"
            + "   ],\n"
            + "   \"annotations\": {\n"
            + "      \"io.registrycache.test.id\": \""
            + repository
            + ":"
            + tag
            + "\"\n"
            + "   }\n"
            + "}\n";
    return new ImageIndex(
        repository, tag, new Manifest(OCI_INDEX, utf8(json)), List.copyOf(platforms));
  }

  /**
   * An OCI image with one uncompressed tar layer of about {@code layerBytes} random bytes (e.g. 40
   * MiB for single-flight tests).
   */
  public static Image withLargeLayer(String repository, String tag, int layerBytes) {
    Random random = new Random(seed(repository, tag));
    byte[] content = new byte[layerBytes];
    random.nextBytes(content);
    byte[] tar = tar("data/large.bin", content);
    Blob layer = new Blob(OCI_LAYER_TAR, tar);
    Blob config =
        config(
            repository, tag, "linux", hostArchitecture(), List.of(Sha256.digest(tar)), OCI_CONFIG);
    Manifest manifest = imageManifest(OCI_MANIFEST, config, List.of(layer), repository + ":" + tag);
    return new Image(repository, tag, manifest, config, List.of(layer));
  }

  /**
   * An OCI image with the given layers, as they are: {@code layers} need not be tar archives, so a
   * test can count bytes exactly (disk budgets, access-log sizes) and share a layer between images.
   * The manifest also carries a JSON unicode escape, which a re-serializing cache would change.
   */
  public static Image withLayers(String repository, String tag, byte[]... layers) {
    List<Blob> blobs = new ArrayList<>();
    List<String> diffIds = new ArrayList<>();
    for (byte[] layer : layers) {
      Blob blob = new Blob(OCI_LAYER_TAR, layer);
      blobs.add(blob);
      diffIds.add(blob.digest());
    }
    Blob config = config(repository, tag, "linux", hostArchitecture(), diffIds, OCI_CONFIG);
    Manifest manifest =
        imageManifest(OCI_MANIFEST, config, blobs, repository + ":" + tag + " \\u00e9");
    return new Image(repository, tag, manifest, config, List.copyOf(blobs));
  }

  /** {@code size} random bytes, the same for the same seed. */
  public static byte[] randomBytes(int size, long seed) {
    byte[] bytes = new byte[size];
    new Random(seed).nextBytes(bytes);
    return bytes;
  }

  private static Image smallImage(
      String repository, String tag, String os, String arch, boolean docker) {
    Random random = new Random(seed(repository, tag));
    List<Blob> layers = new ArrayList<>();
    List<String> diffIds = new ArrayList<>();
    int[] sizes = {6000, 900};
    for (int i = 0; i < sizes.length; i++) {
      byte[] content = new byte[sizes[i]];
      random.nextBytes(content);
      byte[] header = utf8(repository + ":" + tag + " layer " + i + "\n");
      System.arraycopy(header, 0, content, 0, Math.min(header.length, content.length));
      byte[] tar = tar("data/layer-" + i + ".bin", content);
      diffIds.add(Sha256.digest(tar));
      layers.add(new Blob(docker ? DOCKER_LAYER_GZIP : OCI_LAYER_GZIP, gzip(tar)));
    }
    Blob config = config(repository, tag, os, arch, diffIds, docker ? DOCKER_CONFIG : OCI_CONFIG);
    Manifest manifest =
        imageManifest(
            docker ? DOCKER_MANIFEST : OCI_MANIFEST, config, layers, repository + ":" + tag);
    return new Image(repository, tag, manifest, config, List.copyOf(layers));
  }

  private static Blob config(
      String repository,
      String tag,
      String os,
      String arch,
      List<String> diffIds,
      String mediaType) {
    String json =
        "{\"architecture\":\""
            + arch
            + "\",\"os\":\""
            + os
            + "\","
            + "\"config\":{\"Labels\":{\"io.registrycache.test.id\":\""
            + repository
            + ":"
            + tag
            + "\"}},"
            + "\"rootfs\":{\"type\":\"layers\",\"diff_ids\":["
            + diffIds.stream().map(d -> "\"" + d + "\"").collect(Collectors.joining(","))
            + "]}}";
    return new Blob(mediaType, utf8(json));
  }

  private static Manifest imageManifest(
      String mediaType, Blob config, List<Blob> layers, String id) {
    String layerJson =
        layers.stream().map(TestImages::descriptorJson).collect(Collectors.joining(",\n"));
    boolean oci = OCI_MANIFEST.equals(mediaType);
    String json =
        "{\n"
            + "   \"schemaVersion\": 2,\n"
            + "   \"mediaType\": \""
            + mediaType
            + "\",\n"
            + "   \"config\": "
            + descriptorJson(config).strip()
            + ",\n"
            + "   \"layers\": [\n"
            + layerJson
            + "\n"
            + "   ]"
            + (oci
                ? ",\n   \"annotations\": {\n      \"io.registrycache.test.id\": \""
                    + id
                    + "\"\n   }\n"
                : "\n")
            + "}\n";
    return new Manifest(mediaType, utf8(json));
  }

  private static String descriptorJson(Blob blob) {
    return "      {\n"
        + "         \"mediaType\": \""
        + blob.mediaType()
        + "\",\n"
        + "         \"digest\": \""
        + blob.digest()
        + "\",\n"
        + "         \"size\": "
        + blob.size()
        + "\n"
        + "      }";
  }

  private static long seed(String repository, String tag) {
    return (RUN_ID + "/" + repository + ":" + tag).hashCode() * 1_000_003L + repository.length();
  }

  static byte[] utf8(String s) {
    return s.getBytes(StandardCharsets.UTF_8);
  }

  /** A ustar archive with one regular file. */
  static byte[] tar(String name, byte[] content) {
    byte[] header = new byte[512];
    putString(header, 0, 100, name);
    putString(header, 100, 8, "0000644");
    putString(header, 108, 8, "0000000");
    putString(header, 116, 8, "0000000");
    putString(header, 124, 12, String.format("%011o", content.length));
    putString(header, 136, 12, String.format("%011o", 0));
    for (int i = 148; i < 156; i++) {
      header[i] = ' ';
    }
    header[156] = '0';
    putString(header, 257, 6, "ustar");
    header[263] = '0';
    header[264] = '0';
    int checksum = 0;
    for (byte b : header) {
      checksum += b & 0xff;
    }
    putString(header, 148, 7, String.format("%06o", checksum));
    int padded = (content.length + 511) / 512 * 512;
    byte[] tar = new byte[512 + padded + 1024];
    System.arraycopy(header, 0, tar, 0, 512);
    System.arraycopy(content, 0, tar, 512, content.length);
    return tar;
  }

  private static void putString(byte[] header, int offset, int length, String value) {
    byte[] bytes = value.getBytes(StandardCharsets.US_ASCII);
    System.arraycopy(bytes, 0, header, offset, Math.min(bytes.length, length));
  }

  static byte[] gzip(byte[] data) {
    ByteArrayOutputStream out = new ByteArrayOutputStream();
    try (GZIPOutputStream gz = new GZIPOutputStream(out)) {
      gz.write(data);
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
    return out.toByteArray();
  }

  /**
   * The OCI empty descriptor's media type (Image Spec v1.1, "Guidance for an Empty Descriptor").
   */
  public static final String OCI_EMPTY = "application/vnd.oci.empty.v1+json";

  /**
   * An artifact manifest (OCI image manifest with {@code artifactType}) whose {@code subject} is
   * {@code subject}: an empty config, one payload blob, and one annotation.
   *
   * @param blobs the empty config and the payload, to push before the manifest
   */
  public record Artifact(
      String artifactType, Manifest manifest, List<Blob> blobs, String annotation) {}

  /** An artifact (a signature, an SBOM) referring to {@code subject}, with a unique payload. */
  public static Artifact artifact(String artifactType, Manifest subject, String payload) {
    return artifact(artifactType, subject, payload, false);
  }

  /**
   * As {@link #artifact(String, Manifest, String)}; with {@code typedConfig} the config's media
   * type is {@code artifactType} (the older form, which registries that read the artifact type from
   * the config, such as go-containerregistry's, list correctly).
   */
  public static Artifact artifact(
      String artifactType, Manifest subject, String payload, boolean typedConfig) {
    Blob empty = new Blob(typedConfig ? artifactType : OCI_EMPTY, utf8("{}"));
    Blob content = new Blob("application/octet-stream", utf8(payload + " " + RUN_ID + "\n"));
    String annotation = artifactType + " of " + subject.digest();
    String json =
        "{\n"
            + "   \"schemaVersion\": 2,\n"
            + "   \"mediaType\": \""
            + OCI_MANIFEST
            + "\",\n"
            + "   \"artifactType\": \""
            + artifactType
            + "\",\n"
            + "   \"config\": "
            + descriptorJson(empty).strip()
            + ",\n"
            + "   \"layers\": [\n"
            + descriptorJson(content)
            + "\n   ],\n"
            + "   \"subject\": {\n"
            + "      \"mediaType\": \""
            + subject.mediaType()
            + "\",\n"
            + "      \"digest\": \""
            + subject.digest()
            + "\",\n"
            + "      \"size\": "
            + subject.size()
            + "\n"
            + "   },\n"
            + "   \"annotations\": {\n"
            + "      \"io.registrycache.test.note\": \""
            + annotation
            + "\"\n"
            + "   }\n"
            + "}\n";
    return new Artifact(
        artifactType, new Manifest(OCI_MANIFEST, utf8(json)), List.of(empty, content), annotation);
  }

  /**
   * The referrers tag schema's image index (Distribution Spec v1.1, "Referrers Tag Schema") for
   * {@code artifacts}: descriptors with {@code artifactType} and the manifests' annotations, as
   * oras and cosign write it to a registry without the referrers API.
   */
  public static Manifest referrersIndex(List<Artifact> artifacts) {
    String entries =
        artifacts.stream()
            .map(
                a ->
                    "      {\n"
                        + "         \"mediaType\": \""
                        + OCI_MANIFEST
                        + "\",\n"
                        + "         \"digest\": \""
                        + a.manifest().digest()
                        + "\",\n"
                        + "         \"size\": "
                        + a.manifest().size()
                        + ",\n"
                        + "         \"artifactType\": \""
                        + a.artifactType()
                        + "\",\n"
                        + "         \"annotations\": {\n"
                        + "            \"io.registrycache.test.note\": \""
                        + a.annotation()
                        + "\"\n"
                        + "         }\n"
                        + "      }")
            .collect(Collectors.joining(",\n"));
    String json =
        "{\n   \"schemaVersion\": 2,\n   \"mediaType\": \""
            + OCI_INDEX
            + "\",\n   \"manifests\": [\n"
            + entries
            + "\n   ]\n}\n";
    return new Manifest(OCI_INDEX, utf8(json));
  }

  /** A digest nobody has pushed (sha256 of fresh random bytes). */
  public static String unknownDigest() {
    byte[] random = new byte[32];
    new SecureRandom().nextBytes(random);
    return "sha256:" + HexFormat.of().formatHex(Sha256.newDigest().digest(random));
  }
}
