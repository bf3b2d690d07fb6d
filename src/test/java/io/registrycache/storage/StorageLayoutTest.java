package io.registrycache.storage;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.registrycache.config.RegistryCacheProperties;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.NoSuchFileException;
import java.nio.file.Path;
import java.util.HashSet;
import java.util.Map;
import java.util.Random;
import java.util.Set;
import java.util.regex.Pattern;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** The on-disk layout's helpers: segment escaping, temporary names, the atomic move into place. */
class StorageLayoutTest {

  @TempDir Path root;

  private StorageLayout layout() throws IOException {
    return new StorageLayout(
        RegistryCacheProperties.bind(Map.of("registry-cache.storage.path", root.toString())));
  }

  /**
   * The definition {@link StorageLayout#safeSegment} must keep: one {@code _} per code point
   * outside the set.
   */
  private static final Pattern UNSAFE = Pattern.compile("[^A-Za-z0-9._:-]");

  @Test
  void safeSegmentKeepsSafeNamesAndReplacesEachOtherCodePointByOneUnderscore() {
    String local = "local";
    assertThat(StorageLayout.safeSegment(local))
        .as("nothing to replace: the same string")
        .isSameAs(local);
    assertThat(StorageLayout.safeSegment("registry.example.test:5000"))
        .isEqualTo("registry.example.test:5000");
    assertThat(StorageLayout.safeSegment("A-z_0.9:")).isEqualTo("A-z_0.9:");
    assertThat(StorageLayout.safeSegment("")).isEqualTo("");
    assertThat(StorageLayout.safeSegment("a/b")).isEqualTo("a_b");
    assertThat(StorageLayout.safeSegment("../x")).isEqualTo(".._x");
    assertThat(StorageLayout.safeSegment("[::1]:5000")).isEqualTo("_::1_:5000");
    assertThat(StorageLayout.safeSegment("a b\tc\\d")).isEqualTo("a_b_c_d");
    assertThat(StorageLayout.safeSegment("é")).isEqualTo("_");
    assertThat(StorageLayout.safeSegment("x\uD83D\uDE00y"))
        .as("a surrogate pair is one code point")
        .isEqualTo("x_y");
    assertThat(StorageLayout.safeSegment("x\uD83Dy")).as("a lone surrogate").isEqualTo("x_y");
  }

  @Test
  void safeSegmentAnswersAsTheRegularExpressionOnRandomStrings() {
    char[] alphabet = "aZ09._:-_/ \\@[]é\u00a0\uD83D\uDE00\u0663".toCharArray();
    Random random = new Random(29);
    for (int i = 0; i < 20_000; i++) {
      StringBuilder s = new StringBuilder();
      int length = random.nextInt(12);
      for (int j = 0; j < length; j++) {
        s.append(alphabet[random.nextInt(alphabet.length)]);
      }
      String in = s.toString();
      assertThat(StorageLayout.safeSegment(in))
          .as("%s", in)
          .isEqualTo(UNSAFE.matcher(in).replaceAll("_"));
    }
  }

  @Test
  void temporaryFilesAreInTmpNamedForTheirPurposeAndDistinct() throws IOException {
    StorageLayout layout = layout();
    Set<Path> seen = new HashSet<>();
    for (int i = 0; i < 10_000; i++) {
      Path p = layout.newTempFile("blob-abc");
      assertThat(p.getParent()).isEqualTo(layout.tmpRoot());
      assertThat(p.getFileName().toString()).startsWith("blob-abc-").matches("[A-Za-z0-9._-]+");
      assertThat(seen.add(p)).as("%s given twice", p).isTrue();
      assertThat(p).doesNotExist();
    }
  }

  /**
   * Two processes over one folder (replicas on a shared file system, a restart): never one name.
   */
  @Test
  void twoLayoutsOverOneFolderNeverGiveTheSameTemporaryName() throws IOException {
    StorageLayout first = layout();
    StorageLayout second = layout();
    Set<Path> seen = new HashSet<>();
    for (int i = 0; i < 10_000; i++) {
      assertThat(seen.add(first.newTempFile("blob"))).isTrue();
      assertThat(seen.add(second.newTempFile("blob"))).isTrue();
    }
  }

  @Test
  void moveIntoPlaceMakesTheMissingFoldersAndReplacesAnExistingFile() throws IOException {
    StorageLayout layout = layout();
    Path target = layout.tagsRoot().resolve("local/team/app/_tags/v1");
    write(layout, target, "one");
    assertThat(Files.readString(target)).isEqualTo("one");
    write(layout, target, "two");
    assertThat(Files.readString(target)).isEqualTo("two");
    Path sibling = target.resolveSibling("v2");
    write(layout, sibling, "three");
    assertThat(Files.readString(sibling)).isEqualTo("three");
    try (var s = Files.list(layout.tmpRoot())) {
      assertThat(s).as("nothing left in tmp/").isEmpty();
    }
  }

  /**
   * A folder taken away after a file was moved into it (by hand, by another tool) is made again.
   */
  @Test
  void moveIntoPlaceMakesAFolderAgainThatWasDeletedSinceTheLastMoveIntoIt() throws IOException {
    StorageLayout layout = layout();
    Path target = layout.tagsRoot().resolve("local/team/app/_tags/v1");
    write(layout, target, "one");
    Files.delete(target);
    Files.delete(target.getParent());
    Files.delete(target.getParent().getParent());
    write(layout, target, "two");
    assertThat(Files.readString(target)).isEqualTo("two");
    layout.writeAtomically(target.resolveSibling("v2"), "x".getBytes(StandardCharsets.UTF_8));
    assertThat(target.resolveSibling("v2")).hasContent("x");
  }

  @Test
  void moveIntoPlaceOfAMissingTemporaryFileFailsAndStoresNothing() throws IOException {
    StorageLayout layout = layout();
    Path target = layout.blobsRoot().resolve("sha256/ab/abcd");
    assertThatThrownBy(() -> layout.moveIntoPlace(layout.newTempFile("gone"), target))
        .isInstanceOf(NoSuchFileException.class);
    assertThat(target).doesNotExist();
  }

  @Test
  void moveIntoPlaceFailsWhenTheTargetFolderIsAFile() throws IOException {
    StorageLayout layout = layout();
    Path folder = layout.blobsRoot().resolve("sha256/cd");
    Files.createDirectories(folder.getParent());
    Files.writeString(folder, "not a folder");
    Path temp = layout.newTempFile("t");
    Files.writeString(temp, "bytes");
    assertThatThrownBy(() -> layout.moveIntoPlace(temp, folder.resolve("cdef")))
        .isInstanceOf(IOException.class);
    assertThat(temp).as("the temporary file is the caller's to delete").exists();
  }

  private static void write(StorageLayout layout, Path target, String text) throws IOException {
    Path temp = layout.newTempFile("test");
    Files.writeString(temp, text);
    layout.moveIntoPlace(temp, target);
    assertThat(temp).doesNotExist();
  }
}
