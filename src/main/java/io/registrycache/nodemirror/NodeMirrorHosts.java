package io.registrycache.nodemirror;

import java.io.IOException;
import java.io.PrintStream;
import java.io.PrintWriter;
import java.io.UncheckedIOException;
import java.net.URI;
import java.net.URISyntaxException;
import java.nio.charset.StandardCharsets;
import java.nio.file.AtomicMoveNotSupportedException;
import java.nio.file.DirectoryStream;
import java.nio.file.Files;
import java.nio.file.NoSuchFileException;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeSet;
import java.util.concurrent.Callable;
import java.util.concurrent.CountDownLatch;
import java.util.regex.Pattern;
import picocli.CommandLine;
import picocli.CommandLine.Command;
import picocli.CommandLine.Model.CommandSpec;
import picocli.CommandLine.Option;
import picocli.CommandLine.ParameterException;
import picocli.CommandLine.Spec;

/**
 * The node mirror generator: writes containerd's {@code <dir>/<registry>/hosts.toml} for each
 * registry, making the cache the registry's mirror (pull and resolve; containerd then sends the
 * {@code ?ns=<registry>} form, which the cache resolves by an upstream's {@code host} or {@code
 * aliases}) with the registry itself as the fallback {@code server}. It marks each file it writes
 * with {@link #MARK} on the first line, and only ever replaces or deletes files that carry it (or
 * one of the {@link #FORMER_MARKS}): a {@code hosts.toml} someone else wrote is left alone (and its
 * registry skipped, with a warning).
 *
 * <p>Run from the service image by the chart's node mirror DaemonSet ({@code nodeMirror.*}, see
 * docs/deploy.md), or by hand:
 *
 * <pre>
 * java -cp registry-cache.jar -Dloader.main=io.registrycache.nodemirror.NodeMirrorHosts \
 *     org.springframework.boot.loader.launch.PropertiesLauncher \
 *     --dir /etc/containerd/certs.d --cache http://127.0.0.1:30080 --registry registry.example.com
 * </pre>
 *
 * <p>Options: {@code --dir <folder>} (required: containerd's {@code config_path}); {@code --cache
 * <url>} (required unless {@code --remove}: the cache's base URL as the node reaches it, {@code
 * http} or {@code https}); {@code --registry <host>[=<server url>]} (repeatable, at least one
 * unless {@code --remove}: the registry host as image references name it, with an optional fallback
 * server URL, default {@code https://<host>}); {@code --authorization-file <file>} (a fixed {@code
 * Authorization} header value for the cache, e.g. {@code Basic <base64>}, read from the file and
 * never printed); {@code --remove} (delete every file it wrote, then exit); {@code --stay} (after
 * writing, wait until terminated, then delete what it wrote). Exit status 0, 1 on an I/O failure, 2
 * on wrong options.
 */
public final class NodeMirrorHosts {

  /** First line of every file the generator writes: its files are the ones that start with it. */
  public static final String MARK = "# Written by registry-cache's node mirror generator.";

  /**
   * The first line of the files earlier versions wrote, which named the generator's class where it
   * was then: still its own files, replaced or removed like the others.
   */
  static final Set<String> FORMER_MARKS =
      Set.of(
          "# Written by registry-cache's node mirror generator (io.registrycache.admin.NodeMirrorHosts).");

  private static final String FILE = "hosts.toml";
  private static final Pattern HOST =
      Pattern.compile("[A-Za-z0-9]([A-Za-z0-9.-]*[A-Za-z0-9])?(:[0-9]{1,5})?");

  /** Characters that cannot be written into a TOML basic string as they are. */
  private static final Pattern UNSAFE = Pattern.compile("[\"\\\\\\p{Cntrl}]");

  /**
   * A registry the nodes pull from: {@code host} as image references name it (a DNS name or
   * address, with an optional port; {@code docker.io} for the default registry), and the server
   * containerd falls back to when the cache fails.
   */
  public record Registry(String host, URI server) {

    /**
     * @throws IllegalArgumentException when {@code host} is not a host name with an optional port,
     *     or {@code server} not an absolute {@code http}/{@code https} URL
     */
    public Registry {
      if (host == null || !HOST.matcher(host).matches() || host.contains("..")) {
        throw new IllegalArgumentException("not a registry host name: " + host);
      }
      requireHttpUrl(server, "server of " + host);
    }

    /** {@code host}, falling back to {@code https://<host>}. */
    public static Registry of(String host) {
      return new Registry(host, host == null ? null : URI.create("https://" + host));
    }

    /**
     * Parses {@code <host>} or {@code <host>=<server url>}.
     *
     * @throws IllegalArgumentException when either part is invalid
     */
    public static Registry parse(String text) {
      int eq = text.indexOf('=');
      if (eq < 0) {
        return of(text);
      }
      try {
        return new Registry(text.substring(0, eq), new URI(text.substring(eq + 1)));
      } catch (URISyntaxException e) {
        throw new IllegalArgumentException("not a URL: " + text.substring(eq + 1), e);
      }
    }
  }

  /** What {@link #write} or {@link #removeAll} did, as registry hosts (sorted). */
  public record Outcome(Set<String> written, Set<String> removed, Set<String> foreign) {}

  private final URI cache;
  private final String authorization;

  /**
   * @param cache the cache's base URL as the nodes reach it ({@code http} or {@code https}, no
   *     query); written as the mirror host
   * @param authorization a fixed {@code Authorization} header value containerd sends the cache, or
   *     null for none
   * @throws IllegalArgumentException when {@code cache} is not such a URL, or {@code authorization}
   *     holds quotes, backslashes or control characters
   */
  public NodeMirrorHosts(URI cache, String authorization) {
    requireHttpUrl(cache, "cache URL");
    if (cache.getRawQuery() != null || cache.getRawFragment() != null) {
      throw new IllegalArgumentException("cache URL with a query or fragment: " + cache);
    }
    if (authorization != null
        && (authorization.isBlank() || UNSAFE.matcher(authorization).find())) {
      throw new IllegalArgumentException(
          "authorization value empty or with quotes, backslashes or control characters");
    }
    this.cache = cache;
    this.authorization = authorization;
  }

  private static void requireHttpUrl(URI url, String what) {
    if (url == null
        || !url.isAbsolute()
        || url.getHost() == null
        || !("http".equals(url.getScheme()) || "https".equals(url.getScheme()))
        || UNSAFE.matcher(url.toString()).find()) {
      throw new IllegalArgumentException(what + " is not an http or https URL: " + url);
    }
  }

  /**
   * The {@code hosts.toml} of {@code registry}: {@link #MARK}, the fallback server, the cache as
   * its mirror.
   */
  public String hostsToml(Registry registry) {
    String mirror = "[host.\"" + cache + "\"]";
    StringBuilder toml =
        new StringBuilder()
            .append(MARK)
            .append('\n')
            .append("# containerd tries the cache first (it appends ?ns=")
            .append(registry.host())
            .append(", by which the cache picks the upstream),\n")
            .append(
                "# then falls back to the registry itself. Replaced or removed by the generator: do not edit.\n")
            .append("server = \"")
            .append(registry.server())
            .append("\"\n\n")
            .append(mirror)
            .append('\n')
            .append("  capabilities = [\"pull\", \"resolve\"]\n");
    if (authorization != null) {
      toml.append("  [host.\"")
          .append(cache)
          .append("\".header]\n")
          .append("    authorization = \"")
          .append(authorization)
          .append("\"\n");
    }
    return toml.toString();
  }

  /**
   * Writes {@code <dir>/<host>/hosts.toml} for each of {@code registries} (each file replaced
   * atomically, so containerd never reads half of one), then deletes the files this generator wrote
   * for registries no longer listed (and their folders once empty). A {@code hosts.toml} without
   * {@link #MARK} is never replaced or deleted: its registry is reported as foreign.
   *
   * @param dir containerd's hosts folder ({@code config_path}); created when missing
   * @throws IOException when a file cannot be read, written or deleted
   * @throws IllegalArgumentException when two registries have the same host
   */
  public Outcome write(Path dir, List<Registry> registries) throws IOException {
    Map<String, Registry> byHost = new LinkedHashMap<>();
    for (Registry r : registries) {
      if (byHost.put(r.host(), r) != null) {
        throw new IllegalArgumentException("registry listed twice: " + r.host());
      }
    }
    Files.createDirectories(dir);
    Set<String> written = new TreeSet<>();
    Set<String> foreign = new TreeSet<>();
    for (Registry r : byHost.values()) {
      Path folder = dir.resolve(r.host());
      Path file = folder.resolve(FILE);
      if (Files.exists(file) && !ours(file)) {
        foreign.add(r.host());
        continue;
      }
      Files.createDirectories(folder);
      String text = hostsToml(r);
      if (!Files.exists(file) || !Files.readString(file, StandardCharsets.UTF_8).equals(text)) {
        Path tmp = folder.resolve(".hosts.toml.registry-cache.tmp");
        Files.writeString(tmp, text, StandardCharsets.UTF_8);
        try {
          Files.move(
              tmp, file, StandardCopyOption.REPLACE_EXISTING, StandardCopyOption.ATOMIC_MOVE);
        } catch (AtomicMoveNotSupportedException e) {
          Files.move(tmp, file, StandardCopyOption.REPLACE_EXISTING);
        }
      }
      written.add(r.host());
    }
    Set<String> removed = removeOurs(dir, byHost.keySet());
    return new Outcome(written, removed, foreign);
  }

  /**
   * Deletes every {@code <dir>/<host>/hosts.toml} this generator wrote (and its folder when then
   * empty); nothing else.
   *
   * @return the hosts whose files were deleted, in {@link Outcome#removed}
   * @throws IOException when a file cannot be read or deleted
   */
  public static Outcome removeAll(Path dir) throws IOException {
    return new Outcome(Set.of(), removeOurs(dir, Set.of()), Set.of());
  }

  private static Set<String> removeOurs(Path dir, Set<String> keep) throws IOException {
    Set<String> removed = new TreeSet<>();
    if (!Files.isDirectory(dir)) {
      return removed;
    }
    try (DirectoryStream<Path> folders = Files.newDirectoryStream(dir, Files::isDirectory)) {
      for (Path folder : folders) {
        String host = folder.getFileName().toString();
        Path file = folder.resolve(FILE);
        if (keep.contains(host) || !Files.isRegularFile(file) || !ours(file)) {
          continue;
        }
        Files.delete(file);
        removed.add(host);
        try (DirectoryStream<Path> rest = Files.newDirectoryStream(folder)) {
          if (!rest.iterator().hasNext()) {
            Files.delete(folder);
          }
        }
      }
    }
    return removed;
  }

  private static boolean ours(Path file) throws IOException {
    try (var lines = Files.lines(file, StandardCharsets.UTF_8)) {
      return lines
          .findFirst()
          .map(first -> first.equals(MARK) || FORMER_MARKS.contains(first))
          .orElse(false);
    } catch (NoSuchFileException e) {
      return false;
    } catch (UncheckedIOException e) {
      return false; // not UTF-8 text: not a file this generator wrote
    }
  }

  /**
   * The command line; see the class documentation. Exits 0, 1 (I/O failure) or 2 (wrong options).
   */
  public static void main(String[] args) {
    int status = run(args, System.out, System.err);
    if (status != 0) {
      System.exit(status);
    }
  }

  /**
   * {@link #main} without exiting (for tests): parses {@code args} (picocli), writes or removes the
   * files, and with {@code --stay} waits until the JVM shuts down, then deletes what it wrote.
   *
   * @return the exit status: 0, 1 on an I/O failure, 2 on wrong options
   */
  static int run(String[] args, PrintStream out, PrintStream err) {
    CommandLine line =
        new CommandLine(new Cli(out, err))
            .registerConverter(Registry.class, Registry::parse)
            .setErr(new PrintWriter(err, true, err.charset()))
            .setOut(new PrintWriter(out, true, out.charset()));
    line.setParameterExceptionHandler(
        (e, arguments) -> {
          err.println("node-mirror: " + e.getMessage());
          e.getCommandLine().usage(err);
          return 2;
        });
    line.setExecutionExceptionHandler(
        (e, command, parsed) -> {
          if (e instanceof IllegalArgumentException) {
            err.println("node-mirror: " + e.getMessage());
            return 2;
          }
          err.println("node-mirror: " + e);
          return 1;
        });
    return line.execute(args);
  }

  /** The options; see the class documentation. */
  @Command(
      name = "node-mirror",
      description = "Writes containerd's hosts.toml making the cache each registry's mirror.")
  static final class Cli implements Callable<Integer> {
    @Option(
        names = "--dir",
        required = true,
        paramLabel = "<folder>",
        description = "containerd's config_path")
    Path dir;

    @Option(
        names = "--cache",
        paramLabel = "<url>",
        description = "the cache's base URL as the nodes reach it")
    URI cache;

    @Option(
        names = "--registry",
        paramLabel = "<host>[=<server url>]",
        description = "a registry to mirror (repeatable)")
    List<Registry> registries = new ArrayList<>();

    @Option(
        names = "--authorization-file",
        paramLabel = "<file>",
        description = "a fixed Authorization header value for the cache")
    Path authorizationFile;

    @Option(names = "--remove", description = "delete every file this generator wrote, then exit")
    boolean remove;

    @Option(
        names = "--stay",
        description = "after writing, wait until terminated, then delete what was written")
    boolean stay;

    @Spec CommandSpec spec;

    private final PrintStream out;
    private final PrintStream err;

    Cli(PrintStream out, PrintStream err) {
      this.out = out;
      this.err = err;
    }

    @Override
    public Integer call() throws IOException, InterruptedException {
      if (remove) {
        if (stay || cache != null || !registries.isEmpty() || authorizationFile != null) {
          throw new ParameterException(spec.commandLine(), "--remove takes --dir only");
        }
        report(out, dir, removeAll(dir));
        return 0;
      }
      if (cache == null || registries.isEmpty()) {
        throw new ParameterException(
            spec.commandLine(), "--cache and at least one --registry are required");
      }
      String authorization =
          authorizationFile == null
              ? null
              : Files.readString(authorizationFile, StandardCharsets.UTF_8).strip();
      NodeMirrorHosts generator =
          new NodeMirrorHosts(cache, authorization); // IllegalArgumentException: 2
      Outcome outcome = generator.write(dir, registries);
      report(out, dir, outcome);
      for (String host : outcome.foreign()) {
        err.println(
            "node-mirror: "
                + dir.resolve(host).resolve(FILE)
                + " was not written by registry-cache: left alone");
      }
      if (stay) {
        Path folder = dir;
        CountDownLatch done = new CountDownLatch(1);
        Runtime.getRuntime()
            .addShutdownHook(
                new Thread(
                    () -> {
                      try {
                        report(out, folder, removeAll(folder));
                      } catch (IOException e) {
                        err.println("node-mirror: removing the files failed: " + e);
                      }
                      done.countDown();
                    },
                    "node-mirror-remove"));
        out.println("node-mirror: waiting; the files are removed when this process is terminated");
        out.flush();
        done.await();
      }
      return 0;
    }
  }

  private static void report(PrintStream out, Path dir, Outcome outcome) {
    for (String host : outcome.written()) {
      out.println("node-mirror: wrote " + dir.resolve(host).resolve(FILE));
    }
    for (String host : outcome.removed()) {
      out.println("node-mirror: removed " + dir.resolve(host).resolve(FILE));
    }
    out.flush();
  }
}
