package io.registrycache.admin;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

class PreloadFileTest {

  @TempDir Path dir;

  @Test
  void oneReferencePerLineCommentsAndBlanksSkippedDuplicatesDropped() throws IOException {
    Path file = dir.resolve("preload.txt");
    Files.writeString(
        file,
        """
        # base images
        registry.example.com/library/alpine:3.20

          localhost:5000/demo/app:v1   # the demo
        registry.example.com/library/alpine:3.20
        team/x@sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855
        \t# indented comment
        """);
    assertThat(PreloadFile.read(file))
        .containsExactly(
            "registry.example.com/library/alpine:3.20",
            "localhost:5000/demo/app:v1",
            "team/x@sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  }

  @Test
  void aListInOneStringTakesBlanksCommasLineBreaksAndComments() {
    assertThat(PreloadFile.parseList("a:v1 b:v2,c@sha256:x ,\n d # e:v9\n\t a:v1"))
        .containsExactly("a:v1", "b:v2", "c@sha256:x", "d");
    assertThat(PreloadFile.parseList("linux/amd64,linux/arm64"))
        .containsExactly("linux/amd64", "linux/arm64");
    assertThat(PreloadFile.parseList(null)).isEmpty();
    assertThat(PreloadFile.parseList(" ,, ")).isEmpty();
  }

  @Test
  void emptyAndMissingFiles() throws IOException {
    assertThat(PreloadFile.parse(List.of("", "# nothing", "   "))).isEmpty();
    assertThatThrownBy(() -> PreloadFile.read(dir.resolve("missing.txt")))
        .isInstanceOf(IOException.class);
  }
}
