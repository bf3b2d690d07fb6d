package io.registrycache;

import static com.tngtech.archunit.lang.syntax.ArchRuleDefinition.noClasses;
import static com.tngtech.archunit.library.dependencies.SlicesRuleDefinition.slices;

import com.tngtech.archunit.core.importer.ImportOption;
import com.tngtech.archunit.junit.AnalyzeClasses;
import com.tngtech.archunit.junit.ArchTest;
import com.tngtech.archunit.lang.ArchRule;

/**
 * The package dependencies of the pull path (docs/architecture.md): no cycles between packages,
 * and the stores know nothing of upstreams, pull-through, metrics or the HTTP API — the seam a
 * second store (an S3-API object store) plugs into.
 */
@AnalyzeClasses(packages = "io.registrycache", importOptions = ImportOption.DoNotIncludeTests.class)
class PackageDependencyTest {

  @ArchTest
  static final ArchRule noPackageCycles =
      slices().matching("io.registrycache.(*)..").should().beFreeOfCycles();

  @ArchTest
  static final ArchRule storageKnowsOnlyContent =
      noClasses()
          .that().resideInAPackage("io.registrycache.storage..")
          .should().dependOnClassesThat()
          .resideInAnyPackage(
              "io.registrycache.upstream..",
              "io.registrycache.proxy..",
              "io.registrycache.metrics..",
              "io.registrycache.api..",
              "io.registrycache.admin..");

  @ArchTest
  static final ArchRule ociValueTypesStandAlone =
      noClasses()
          .that().resideInAPackage("io.registrycache.oci..")
          .should().dependOnClassesThat()
          .resideOutsideOfPackages("io.registrycache.oci..", "java..", "org.springframework.http..", "tools.jackson..");

  @ArchTest
  static final ArchRule clusterStandsAlone =
      noClasses()
          .that().resideInAPackage("io.registrycache.cluster..")
          .should().dependOnClassesThat()
          .resideInAnyPackage(
              "io.registrycache.upstream..",
              "io.registrycache.proxy..",
              "io.registrycache.storage..",
              "io.registrycache.metrics..",
              "io.registrycache.api..",
              "io.registrycache.admin..",
              "io.registrycache.config..");
}
