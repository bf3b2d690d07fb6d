package io.registrycache.oci;

import static org.assertj.core.api.Assertions.assertThat;

import org.junit.jupiter.api.Test;

class MediaTypesTest {

  @Test
  void constantsAreTheRegisteredTypes() {
    assertThat(MediaTypes.OCI_INDEX).isEqualTo("application/vnd.oci.image.index.v1+json");
    assertThat(MediaTypes.OCI_MANIFEST).isEqualTo("application/vnd.oci.image.manifest.v1+json");
    assertThat(MediaTypes.DOCKER_MANIFEST_LIST)
        .isEqualTo("application/vnd.docker.distribution.manifest.list.v2+json");
    assertThat(MediaTypes.DOCKER_MANIFEST)
        .isEqualTo("application/vnd.docker.distribution.manifest.v2+json");
  }

  @Test
  void allManifestsListsIndexTypesFirst() {
    assertThat(MediaTypes.ALL_MANIFESTS)
        .containsExactly(
            MediaTypes.OCI_INDEX,
            MediaTypes.DOCKER_MANIFEST_LIST,
            MediaTypes.OCI_MANIFEST,
            MediaTypes.DOCKER_MANIFEST);
  }

  @Test
  void indexTypes() {
    assertThat(MediaTypes.isIndex(MediaTypes.OCI_INDEX)).isTrue();
    assertThat(MediaTypes.isIndex(MediaTypes.DOCKER_MANIFEST_LIST)).isTrue();
    assertThat(MediaTypes.isIndex(MediaTypes.OCI_MANIFEST)).isFalse();
    assertThat(MediaTypes.isIndex(MediaTypes.DOCKER_MANIFEST)).isFalse();
    assertThat(MediaTypes.isIndex("application/json")).isFalse();
    assertThat(MediaTypes.isIndex(null)).isFalse();
  }

  @Test
  void essenceDropsParametersAndCase() {
    assertThat(MediaTypes.essence(MediaTypes.OCI_MANIFEST)).isEqualTo(MediaTypes.OCI_MANIFEST);
    assertThat(MediaTypes.essence("application/vnd.oci.image.manifest.v1+json; charset=utf-8"))
        .isEqualTo(MediaTypes.OCI_MANIFEST);
    assertThat(MediaTypes.essence("Application/VND.OCI.Image.Index.v1+JSON"))
        .isEqualTo(MediaTypes.OCI_INDEX);
    assertThat(MediaTypes.essence("  application/json ;q=0.5")).isEqualTo("application/json");
    assertThat(MediaTypes.essence("")).isEmpty();
    assertThat(MediaTypes.essence(null)).isNull();
  }
}
