package io.registrycache;

import static com.tngtech.archunit.lang.syntax.ArchRuleDefinition.noClasses;
import static com.tngtech.archunit.library.dependencies.SlicesRuleDefinition.slices;

import com.tngtech.archunit.core.domain.JavaClass;
import com.tngtech.archunit.core.importer.ImportOption;
import com.tngtech.archunit.junit.AnalyzeClasses;
import com.tngtech.archunit.junit.ArchTest;
import com.tngtech.archunit.lang.ArchRule;
import com.tngtech.archunit.library.dependencies.SliceAssignment;
import com.tngtech.archunit.library.dependencies.SliceIdentifier;
import java.util.ArrayList;
import java.util.List;

/**
 * The package dependencies of docs/architecture.md, for every package: no cycles between packages,
 * each package depends only on the ones drawn below it, and inside {@code storage} no two files
 * depend on each other (a store is read top to bottom).
 *
 * <pre>
 * admin ──► api, proxy, policy, storage, upstream, metrics, startup (whether this start is the training run)
 * startup ──► proxy, storage, upstream, metrics
 * api ──► auth, ratelimit, proxy, upstream, metrics          peer ──► auth, proxy, upstream, cluster
 * ratelimit ──► auth, proxy (its FillPermits)
 * proxy ──► storage, upstream, metrics, cluster, policy, signature
 * policy ──► (oci, config)
 * storage ──► (oci, config)   upstream ──► (oci, config, tracing)   auth ──► (oci, config, upstream, proxy's PassthroughAccess)   metrics ──► config
 * management ──► config
 * signature ──► upstream, config (finding and checking an image's cosign signatures; the signature policy)
 * cluster ──► storage (its EvictionTurn), config
 * nodemirror, htpasswd, logging, tracing, oci, config ──► nothing   (api, proxy, peer ──► tracing as well)
 * </pre>
 */
@AnalyzeClasses(packages = "io.registrycache", importOptions = ImportOption.DoNotIncludeTests.class)
class PackageDependencyTest {

  private static final List<String> ALL =
      List.of(
          "oci",
          "config",
          "cluster",
          "metrics",
          "tracing",
          "storage",
          "upstream",
          "auth",
          "proxy",
          "policy",
          "ratelimit",
          "api",
          "peer",
          "admin",
          "startup",
          "logging",
          "management",
          "nodemirror",
          "htpasswd",
          "signature");

  /** {@code package} may depend on {@code allowed} (and itself) only, of the cache's packages. */
  private static ArchRule only(String pkg, String... allowed) {
    List<String> forbidden = new ArrayList<>();
    for (String other : ALL) {
      if (!other.equals(pkg) && !List.of(allowed).contains(other)) {
        forbidden.add("io.registrycache." + other + "..");
      }
    }
    return noClasses()
        .that()
        .resideInAPackage("io.registrycache." + pkg + "..")
        .should()
        .dependOnClassesThat()
        .resideInAnyPackage(forbidden.toArray(String[]::new))
        .as(pkg + " depends only on " + String.join(", ", allowed));
  }

  @ArchTest
  static final ArchRule noPackageCycles =
      slices().matching("io.registrycache.(*)..").should().beFreeOfCycles();

  @ArchTest static final ArchRule oci = only("oci");
  @ArchTest static final ArchRule config = only("config", "oci");

  /**
   * Replicas: membership and ownership, and the replica whose turn it is to evict
   * (storage.EvictionTurn).
   */
  @ArchTest static final ArchRule cluster = only("cluster", "storage", "config");

  @ArchTest static final ArchRule metrics = only("metrics", "config");

  /**
   * The stores know nothing of upstreams, pull-through, metrics or HTTP: the seam a store plugs
   * into.
   */
  @ArchTest static final ArchRule storage = only("storage", "oci", "config");

  @ArchTest static final ArchRule upstream = only("upstream", "tracing", "oci", "config");

  /**
   * Who may pull: credentials, rules and the one decision (auth.PullAccess), which also says with
   * whose credentials the upstream is asked and has a pass-through upstream confirm a client's
   * (proxy.PassthroughAccess); nothing of HTTP routes or stores.
   */
  @ArchTest static final ArchRule auth = only("auth", "upstream", "proxy", "oci", "config");

  @ArchTest
  static final ArchRule proxy =
      only(
          "proxy",
          "storage",
          "upstream",
          "metrics",
          "cluster",
          "policy",
          "signature",
          "tracing",
          "oci",
          "config");

  /**
   * What may be pulled at all (the platform policy): decisions from manifests' and configs' bytes,
   * nothing of stores, upstreams or HTTP.
   */
  @ArchTest static final ArchRule policy = only("policy", "oci", "config");

  /** How much each identity may pull: knows who (auth) and the proxy's fill permits, not HTTP. */
  @ArchTest static final ArchRule ratelimit = only("ratelimit", "auth", "proxy", "oci", "config");

  /** The HTTP API sees blobs and manifests through the proxy's types, never a store's. */
  @ArchTest
  static final ArchRule api =
      only("api", "auth", "ratelimit", "proxy", "upstream", "metrics", "tracing", "oci", "config");

  /** The peer port's challenge comes from auth's one builder (auth.Challenges). */
  @ArchTest
  static final ArchRule peer =
      only("peer", "auth", "proxy", "upstream", "cluster", "metrics", "tracing", "oci", "config");

  /**
   * Who may use the management port: Spring Security in the management server's context, nothing of
   * the pull path.
   */
  @ArchTest static final ArchRule management = only("management", "config");

  /** Spans of pulls: Micrometer Tracing only, knowing nothing of the cache's other packages. */
  @ArchTest static final ArchRule tracing = only("tracing");

  /**
   * Operations on the management port: the admin endpoint, preloading and pruning, over the pull
   * path's own services; skips the preload file in the AOT cache's training run (startup).
   */
  @ArchTest
  static final ArchRule admin =
      only(
          "admin",
          "api",
          "proxy",
          "policy",
          "storage",
          "upstream",
          "metrics",
          "startup",
          "oci",
          "config");

  /**
   * The JVM's start-up: the AOT cache's training run and the warm-up, through the pull path's own
   * classes from a synthetic upstream; nothing of HTTP routes or the admin API.
   */
  @ArchTest
  static final ArchRule startup =
      only("startup", "proxy", "storage", "upstream", "metrics", "oci", "config");

  /**
   * Image signatures: finding an image's cosign signatures through the upstream client, checking
   * them with the configured keys, and the signature policy's verdicts; nothing of the pull path,
   * stores or HTTP routes.
   */
  @ArchTest static final ArchRule signature = only("signature", "upstream", "oci", "config");

  /** Log-forging protection: a Logback logging system that knows nothing of the cache. */
  @ArchTest static final ArchRule logging = only("logging");

  /** The node mirror generator: a command of its own, run without the service's beans. */
  @ArchTest static final ArchRule nodemirror = only("nodemirror");

  /** The htpasswd subcommand: a command of its own, run without the service's beans. */
  @ArchTest static final ArchRule htpasswd = only("htpasswd");

  @ArchTest
  static final ArchRule ociValueTypesStandAlone =
      noClasses()
          .that()
          .resideInAPackage("io.registrycache.oci..")
          .should()
          .dependOnClassesThat()
          .resideOutsideOfPackages(
              "io.registrycache.oci..", "java..", "org.springframework.http..", "tools.jackson..");

  /** Each top-level class of {@code storage} (its nested classes with it) is a slice of its own. */
  private static final SliceAssignment STORAGE_FILES =
      new SliceAssignment() {
        @Override
        public SliceIdentifier getIdentifierOf(JavaClass javaClass) {
          if (!javaClass.getPackageName().equals("io.registrycache.storage")) {
            return SliceIdentifier.ignore();
          }
          String name = javaClass.getName();
          int nested = name.indexOf('$');
          return SliceIdentifier.of(nested < 0 ? name : name.substring(0, nested));
        }

        @Override
        public String getDescription() {
          return "files of io.registrycache.storage";
        }
      };

  @ArchTest
  static final ArchRule noFileCyclesInStorage =
      slices().assignedFrom(STORAGE_FILES).should().beFreeOfCycles();
}
