package io.registrycache.oci;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import java.nio.charset.StandardCharsets;
import org.junit.jupiter.api.Test;

class ManifestContentTest {

  private static final String D1 = "sha256:" + "1".repeat(64);
  private static final String D2 = "sha256:" + "2".repeat(64);

  private static byte[] bytes(String s) {
    return s.getBytes(StandardCharsets.UTF_8);
  }

  @Test
  void imageManifestListsConfigAndLayers() {
    ManifestContent m =
        ManifestContent.parse(
            bytes(
                "{\"schemaVersion\":2,\"mediaType\":\""
                    + MediaTypes.OCI_MANIFEST
                    + "\","
                    + "\"config\":{\"mediaType\":\"c\",\"digest\":\""
                    + D1
                    + "\",\"size\":3},"
                    + "\"layers\":[{\"mediaType\":\"l\",\"digest\":\""
                    + D2
                    + "\",\"size\":5}]}"),
            (String) null);
    assertThat(m.mediaType().value()).isEqualTo(MediaTypes.OCI_MANIFEST);
    assertThat(m.references()).extracting(d -> d.digest().toString()).containsExactly(D1, D2);
    assertThat(m.references().get(1).size()).isEqualTo(5);
    assertThat(m.isIndex()).isFalse();
  }

  @Test
  void indexWithoutMediaTypeFieldTakesItFromContentType() {
    ManifestContent m =
        ManifestContent.parse(
            bytes(
                "{\"schemaVersion\":2,\"manifests\":[{\"digest\":\""
                    + D1
                    + "\",\"size\":1,"
                    + "\"platform\":{\"os\":\"linux\",\"architecture\":\"arm64\",\"variant\":\"v8\"}}]}"),
            MediaTypes.OCI_INDEX + "; charset=utf-8");
    assertThat(m.isIndex()).isTrue();
    assertThat(m.references().get(0).platform()).isEqualTo("linux/arm64/v8");
  }

  @Test
  void garbageAndContradictionsAreManifestInvalid() {
    for (String body :
        new String[] {
          "not json",
          "[1,2]",
          "{\"schemaVersion\":1,\"name\":\"x\"}",
          "{}",
          "{\"schemaVersion\":2,\"config\":{\"digest\":\"md5:abc\"}}"
        }) {
      assertThatThrownBy(() -> ManifestContent.parse(bytes(body), "application/json"))
          .as(body)
          .isInstanceOfSatisfying(
              OciException.class,
              e -> assertThat(e.code()).isEqualTo(OciErrorCode.MANIFEST_INVALID));
    }
    assertThatThrownBy(
            () ->
                ManifestContent.parse(
                    bytes(
                        "{\"schemaVersion\":2,\"mediaType\":\""
                            + MediaTypes.DOCKER_MANIFEST
                            + "\",\"config\":{\"digest\":\""
                            + D1
                            + "\"}}"),
                    MediaTypes.OCI_MANIFEST))
        .isInstanceOf(OciException.class);
  }

  @Test
  void onlyManifestMediaTypesAreAccepted() {
    String noType = "{\"schemaVersion\":2,\"config\":{\"digest\":\"" + D1 + "\"},\"layers\":[]}";
    assertThatThrownBy(() -> ManifestContent.parse(bytes(noType), "text/html; charset=utf-8"))
        .as("a web page's Content-Type is not a manifest media type")
        .isInstanceOfSatisfying(
            OciException.class, e -> assertThat(e.code()).isEqualTo(OciErrorCode.MANIFEST_INVALID));
    assertThatThrownBy(
            () ->
                ManifestContent.parse(
                    bytes(
                        "{\"schemaVersion\":2,\"mediaType\":\"text/html\",\"config\":{\"digest\":\""
                            + D1
                            + "\"}}"),
                    (String) null))
        .isInstanceOfSatisfying(
            OciException.class, e -> assertThat(e.code()).isEqualTo(OciErrorCode.MANIFEST_INVALID));
    assertThat(ManifestContent.parse(bytes(noType), "application/json").mediaType().value())
        .as("a generic Content-Type: the body's structure decides")
        .isEqualTo(MediaTypes.OCI_MANIFEST);
    String declared =
        "{\"schemaVersion\":2,\"mediaType\":\""
            + MediaTypes.DOCKER_MANIFEST
            + "\",\"config\":{\"digest\":\""
            + D1
            + "\"},\"layers\":[]}";
    assertThat(ManifestContent.parse(bytes(declared), "text/html").mediaType().value())
        .as("the body's mediaType field names the manifest type")
        .isEqualTo(MediaTypes.DOCKER_MANIFEST);
  }
}
