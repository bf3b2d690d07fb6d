package io.registrycache.api;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.registrycache.api.RegistryPath.Endpoint;
import io.registrycache.oci.OciErrorCode;
import io.registrycache.oci.OciException;
import org.junit.jupiter.api.Test;

class RegistryPathTest {

  @Test
  void manifestPathWithManyComponents() {
    RegistryPath p = RegistryPath.parse("a/b/c/d/manifests/latest");
    assertThat(p.rawName()).isEqualTo("a/b/c/d");
    assertThat(p.endpoint()).isEqualTo(Endpoint.MANIFEST);
    assertThat(p.reference()).isEqualTo("latest");
  }

  @Test
  void endpointWordsInsideTheNameStayInTheName() {
    RegistryPath p = RegistryPath.parse("team/manifests/blobs/manifests/v1");
    assertThat(p.rawName()).isEqualTo("team/manifests/blobs");
    assertThat(p.reference()).isEqualTo("v1");
  }

  @Test
  void blobTagsAndUploads() {
    assertThat(RegistryPath.parse("localhost:5000/x/blobs/sha256:ab").endpoint())
        .isEqualTo(Endpoint.BLOB);
    assertThat(RegistryPath.parse("x/tags/list").endpoint()).isEqualTo(Endpoint.TAGS);
    assertThat(RegistryPath.parse("x/blobs/uploads/").endpoint()).isEqualTo(Endpoint.BLOB_UPLOAD);
    assertThat(RegistryPath.parse("x/blobs/uploads/1234-abcd").endpoint())
        .isEqualTo(Endpoint.BLOB_UPLOAD);
    assertThat(RegistryPath.parse("x/referrers/sha256:ab").endpoint())
        .isEqualTo(Endpoint.REFERRERS);
  }

  @Test
  void unknownEndpointIsNameUnknown() {
    assertThatThrownBy(() -> RegistryPath.parse("x/whatever"))
        .isInstanceOfSatisfying(
            OciException.class, e -> assertThat(e.code()).isEqualTo(OciErrorCode.NAME_UNKNOWN));
    assertThatThrownBy(() -> RegistryPath.parse("manifests/latest"))
        .isInstanceOf(OciException.class);
  }
}
