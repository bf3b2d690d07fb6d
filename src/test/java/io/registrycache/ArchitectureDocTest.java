package io.registrycache;

import static org.assertj.core.api.Assertions.assertThat;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Set;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.junit.jupiter.api.Test;

/**
 * docs/architecture.md names the classes a request passes through; every class it names by package
 * ({@code proxy/BlobDownload.java}, {@code storage/BlobWriter}, {@code s3/S3Objects}, {@code
 * proxy.SingleFlight}) must exist, so the document cannot silently outlive the code.
 */
class ArchitectureDocTest {

  private static final Path MAIN = Path.of("src/main/java/io/registrycache");
  private static final Pattern BY_PATH =
      Pattern.compile("`([a-z0-9]+)/([A-Z][A-Za-z0-9]*)(?:\\.java)?[`.#]");
  private static final Pattern BY_PACKAGE =
      Pattern.compile(
          "`(api|auth|oci|proxy|storage|upstream|admin|metrics|cluster|peer|config|tracing|management|ratelimit|nodemirror|startup|logging|htpasswd|policy|s3)\\.([A-Z][A-Za-z0-9]*)");

  /** The classes the document names with their package, as {@code package/Name}. */
  static Set<String> named(String doc) {
    Set<String> names = new LinkedHashSet<>();
    for (Pattern p : List.of(BY_PATH, BY_PACKAGE)) {
      Matcher m = p.matcher(doc);
      while (m.find()) {
        names.add(m.group(1) + "/" + m.group(2));
      }
    }
    return names;
  }

  private static boolean exists(String name) {
    String pkg = name.substring(0, name.indexOf('/'));
    String cls = name.substring(name.indexOf('/') + 1) + ".java";
    Path folder = pkg.equals("s3") ? MAIN.resolve("storage/s3") : MAIN.resolve(pkg);
    return Files.exists(folder.resolve(cls));
  }

  @Test
  void everyClassTheArchitectureNamesExists() throws IOException {
    Set<String> named = named(Files.readString(Path.of("docs/architecture.md")));
    assertThat(named).as("classes named in docs/architecture.md").hasSizeGreaterThan(10);
    List<String> missing = new ArrayList<>();
    for (String name : named) {
      if (!exists(name)) {
        missing.add(name);
      }
    }
    assertThat(missing).as("named in docs/architecture.md but not in src/main").isEmpty();
  }

  @Test
  void aRenamedClassIsCaught() {
    assertThat(named("read `proxy/NoSuchDownload.java` then `storage.GoneStore`"))
        .containsExactly("proxy/NoSuchDownload", "storage/GoneStore")
        .noneMatch(ArchitectureDocTest::exists);
  }
}
