package io.registrycache.storage;

import static org.assertj.core.api.Assertions.assertThat;

import io.registrycache.config.ContentScope;
import io.registrycache.config.RegistryCacheProperties;
import io.registrycache.oci.Digest;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** The file-system content links ({@link LinkJournal}) read back as written, across restarts. */
class LinkJournalTest {

  @TempDir Path root;
  private StorageLayout layout;
  private final Digest a = Digest.sha256("a".getBytes(StandardCharsets.UTF_8));
  private final Digest b = Digest.sha256("b".getBytes(StandardCharsets.UTF_8));

  @BeforeEach
  void open() throws Exception {
    layout =
        new StorageLayout(
            RegistryCacheProperties.bind(Map.of("registry-cache.storage.path", root.toString())));
  }

  @Test
  void linksAndRemovalsSurviveARestartInTheirOrder() throws Exception {
    LinkJournal journal = new LinkJournal(layout, "blobs");
    journal.create(a, "hub", "library/alpine");
    journal.create(a, "hub", "team/app");
    journal.create(b, "ghcr", "org/tool");
    journal.removeAll(a);
    journal.create(a, "hub", "library/busybox"); // stored again, fetched for another repository
    journal.close();

    assertThat(scan(new LinkJournal(layout, "blobs")))
        .isEqualTo(Map.of(a, Set.of("hub/library/busybox"), b, Set.of("ghcr/org/tool")));
  }

  @Test
  void startUpCompactsTheJournalToTheLiveLinks() throws Exception {
    LinkJournal journal = new LinkJournal(layout, "manifests");
    for (int i = 0; i < 50; i++) {
      journal.create(a, "hub", "r" + i);
      journal.removeAll(a);
    }
    journal.create(b, "hub", "kept");
    journal.close();
    Path file = layout.linksRoot().resolve("manifests.journal");
    assertThat(Files.readAllLines(file)).hasSize(101);

    assertThat(scan(new LinkJournal(layout, "manifests"))).isEqualTo(Map.of(b, Set.of("hub/kept")));
    assertThat(Files.readAllLines(file)).containsExactly("+ " + b + " hub/kept");
  }

  @Test
  void aJournalOfLiveLinksOnlyIsNotRewrittenAtStartUp() throws Exception {
    LinkJournal journal = new LinkJournal(layout, "blobs");
    journal.create(a, "hub", "x");
    journal.create(b, "hub", "y");
    journal.close();
    Path file = layout.linksRoot().resolve("blobs.journal");
    Object inode = Files.getAttribute(file, "unix:ino");

    assertThat(scan(new LinkJournal(layout, "blobs")))
        .isEqualTo(Map.of(a, Set.of("hub/x"), b, Set.of("hub/y")));
    assertThat(Files.getAttribute(file, "unix:ino"))
        .as("the same file, not a rewritten one")
        .isEqualTo(inode);

    journal = new LinkJournal(layout, "blobs");
    scan(journal);
    journal.create(a, "hub", "x"); // a repeated line: the next start rewrites
    journal.close();
    scan(new LinkJournal(layout, "blobs"));
    assertThat(Files.getAttribute(file, "unix:ino")).isNotEqualTo(inode);
    assertThat(Files.readAllLines(file)).hasSize(2);
  }

  @Test
  void aRunningServiceCompactsOnceItHasAppendedEnough() throws Exception {
    LinkJournal journal = new LinkJournal(layout, "blobs", 10);
    for (int i = 0; i < 25; i++) {
      journal.create(a, "hub", "r");
      journal.removeAll(a);
    }
    journal.create(b, "hub", "kept");
    journal.close();
    List<String> lines = Files.readAllLines(layout.linksRoot().resolve("blobs.journal"));
    assertThat(lines).hasSizeLessThanOrEqualTo(11).contains("+ " + b + " hub/kept");
    assertThat(scan(new LinkJournal(layout, "blobs"))).isEqualTo(Map.of(b, Set.of("hub/kept")));
  }

  @Test
  void aLineCutShortByACrashIsSkippedAndTheRestKept() throws Exception {
    Path file = layout.linksRoot().resolve("blobs.journal");
    String whole = "+ " + a + " hub/library/alpine\n";
    String torn = "+ " + b.toString().substring(0, 30);
    Files.writeString(file, whole + "garbage\n" + "+ " + b + " nokey\n" + torn);

    assertThat(scan(new LinkJournal(layout, "blobs")))
        .isEqualTo(Map.of(a, Set.of("hub/library/alpine")));
    // the next link starts on a line of its own: the torn line was compacted away
    LinkJournal journal = new LinkJournal(layout, "blobs");
    scan(journal);
    journal.create(b, "hub", "team/app");
    journal.close();
    assertThat(scan(new LinkJournal(layout, "blobs")))
        .isEqualTo(Map.of(a, Set.of("hub/library/alpine"), b, Set.of("hub/team/app")));
  }

  @Test
  void theFolderLayoutOfEarlierVersionsIsMovedIntoTheJournal() throws Exception {
    for (Path link : List.of(legacyLink(a, "hub/library/alpine"), legacyLink(b, "ghcr/org/tool"))) {
      Files.createDirectories(link.getParent());
      Files.createFile(link);
    }

    assertThat(scan(new LinkJournal(layout, "blobs")))
        .isEqualTo(Map.of(a, Set.of("hub/library/alpine"), b, Set.of("ghcr/org/tool")));
    assertThat(layout.linksRoot().resolve("blobs")).doesNotExist();
    assertThat(scan(new LinkJournal(layout, "blobs")))
        .as("read from the journal alone after the move")
        .isEqualTo(Map.of(a, Set.of("hub/library/alpine"), b, Set.of("ghcr/org/tool")));
  }

  @Test
  void contentLinksDropLinksOfContentNoLongerStored() throws Exception {
    LinkJournal journal = new LinkJournal(layout, "blobs");
    journal.create(a, "hub", "x");
    journal.create(b, "hub", "y");
    journal.close();

    ContentLinks links = new ContentLinks(layout, "blobs", ContentScope.REPOSITORY, b::equals);
    assertThat(links.servable(b, "hub", "y")).isTrue();
    assertThat(links.servable(a, "hub", "x")).isFalse();
    links.close();
    assertThat(scan(new LinkJournal(layout, "blobs"))).isEqualTo(Map.of(b, Set.of("hub/y")));
  }

  /**
   * {@code links/blobs/sha256/<xx>/<hex>/<upstream>/<repository>/_link}, as versions before the
   * journal wrote it.
   */
  private Path legacyLink(Digest digest, String key) {
    String hex = digest.toString().substring("sha256:".length());
    return layout
        .linksRoot()
        .resolve("blobs/sha256")
        .resolve(hex.substring(0, 2))
        .resolve(hex)
        .resolve(key)
        .resolve("_link");
  }

  private static Map<Digest, Set<String>> scan(LinkJournal journal) {
    Map<Digest, Set<String>> seen = new HashMap<>();
    journal.scan((digest, key) -> seen.computeIfAbsent(digest, d -> new HashSet<>()).add(key));
    return seen;
  }
}
