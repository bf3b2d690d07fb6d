package io.registrycache.config;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatCode;
import static org.assertj.core.api.Assertions.catchThrowable;

import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import io.registrycache.signature.SignaturePolicy;
import java.io.IOException;
import java.io.StringWriter;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.ServerSocket;
import java.nio.file.Files;
import java.nio.file.Path;
import java.security.KeyPairGenerator;
import java.security.spec.ECGenParameterSpec;
import java.time.Clock;
import java.util.HashMap;
import java.util.Map;
import org.bouncycastle.openssl.jcajce.JcaPEMWriter;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.springframework.beans.factory.BeanCreationException;
import org.springframework.boot.context.properties.bind.Binder;
import org.springframework.boot.context.properties.source.MapConfigurationPropertySource;
import org.springframework.boot.diagnostics.FailureAnalysis;
import org.springframework.boot.diagnostics.FailureAnalyzer;

/**
 * Each kind of configuration error stops the start with one line of description (the setting and
 * its value) and one of action, from the failure analyzer of its kind ({@link SettingFailures});
 * {@link SettingsCheck} finds them before the context is refreshed.
 */
class SettingFailuresTest {

  @TempDir Path dir;

  private static Throwable checked(Map<String, String> settings) {
    return catchThrowable(() -> SettingsCheck.check(RegistryCacheProperties.bind(settings)));
  }

  /**
   * The analysis of {@code failure} as Spring Boot would get it: wrapped, as a failed bean
   * creation.
   */
  private static FailureAnalysis analysis(FailureAnalyzer analyzer, Throwable failure) {
    assertThat(failure).as("the check refuses the setting").isNotNull();
    FailureAnalysis analysis =
        analyzer.analyze(new BeanCreationException("someBean", "creation failed", failure));
    assertThat(analysis).as("analysis of " + failure).isNotNull();
    assertThat(analysis.getDescription()).doesNotContain("\n");
    assertThat(analysis.getAction()).doesNotContain("\n");
    return analysis;
  }

  @Test
  void anUpstreamUrlThatIsNotAUrl() {
    FailureAnalysis analysis =
        analysis(
            new SettingFailures.UpstreamUrlAnalyzer(),
            checked(Map.of("registry-cache.upstreams.x.url", "notaurl")));

    assertThat(analysis.getDescription())
        .isEqualTo(
            "registry-cache.upstreams.x.url is 'notaurl', which is not an http or https URL with a host.");
    assertThat(analysis.getAction())
        .startsWith("Set registry-cache.upstreams.x.url to the registry's base URL, e.g. https://");
  }

  @Test
  void anUpstreamUrlOfAnotherSchemeOrWithoutAHost() {
    assertThat(checked(Map.of("registry-cache.upstreams.x.url", "ftp://files.example.com")))
        .isInstanceOf(SettingFailures.UpstreamUrlException.class);
    assertThat(checked(Map.of("registry-cache.upstreams.x.url", "https:///v2")))
        .isInstanceOf(SettingFailures.UpstreamUrlException.class);
    assertThat(checked(Map.of("registry-cache.upstreams.x.url", "http://a b")))
        .isInstanceOf(SettingFailures.UpstreamUrlException.class);
  }

  @Test
  void anUpstreamWithoutUrl() {
    FailureAnalysis analysis =
        analysis(
            new SettingFailures.UpstreamUrlAnalyzer(),
            checked(Map.of("registry-cache.upstreams.x.host", "registry.example.com")));

    assertThat(analysis.getDescription())
        .isEqualTo(
            "registry-cache.upstreams.x.url is not set: the cache does not know where upstream 'x' is.");
  }

  @Test
  void theBuiltInUpstreamNeedsNoUrlAndGoodSettingsPass() {
    assertThatCode(
            () ->
                SettingsCheck.check(
                    RegistryCacheProperties.bind(
                        Map.of("registry-cache.upstreams.local.aliases", "mirror.example.com"))))
        .doesNotThrowAnyException();
    assertThatCode(
            () ->
                SettingsCheck.check(
                    RegistryCacheProperties.bind(
                        Map.of(
                            "registry-cache.upstreams.hub.url", "https://registry.example.com/",
                            "registry-cache.upstreams.own.url", "http://localhost:5000",
                            "registry-cache.default-upstream", "hub"))))
        .doesNotThrowAnyException();
    // left at 'local' with other keys: the only upstream (or none), as upstream.Upstreams resolves
    // it
    assertThatCode(
            () ->
                SettingsCheck.check(
                    RegistryCacheProperties.bind(
                        Map.of(
                            "registry-cache.upstreams.hub.url", "https://registry.example.com"))))
        .doesNotThrowAnyException();
  }

  @Test
  void anUnknownDefaultUpstream() {
    FailureAnalysis analysis =
        analysis(
            new SettingFailures.UnknownUpstreamAnalyzer(),
            checked(Map.of("registry-cache.default-upstream", "hub")));

    assertThat(analysis.getDescription())
        .isEqualTo(
            "registry-cache.default-upstream names upstream 'hub', which is not configured (upstream keys: local).");
    assertThat(analysis.getAction())
        .isEqualTo(
            "Set registry-cache.default-upstream to one of local, or configure registry-cache.upstreams.hub.url.");
  }

  private static Map<String, String> ruleFor(String upstream) {
    Map<String, String> settings =
        new HashMap<>(
            Map.of(
                "registry-cache.auth.enabled", "true",
                "registry-cache.upstreams.own.url", "http://localhost:5000",
                "registry-cache.auth.rules[0].subjects", "anonymous",
                "registry-cache.auth.rules[0].repositories", "team/**",
                "registry-cache.auth.rules[1].subjects", "anonymous",
                "registry-cache.auth.rules[1].repositories", "library/*"));
    settings.put("registry-cache.auth.rules[1].upstreams", upstream);
    return settings;
  }

  @Test
  void aRuleNamingAnUnknownUpstream() {
    FailureAnalysis analysis =
        analysis(new SettingFailures.UnknownUpstreamAnalyzer(), checked(ruleFor("own,hub")));

    assertThat(analysis.getDescription())
        .isEqualTo(
            "registry-cache.auth.rules[1].upstreams names upstream 'hub', which is not configured (upstream keys: own).");
    assertThat(analysis.getAction())
        .isEqualTo(
            "Name one of own or *, configure registry-cache.upstreams.hub.url, "
                + "or set registry-cache.allow-any-upstream=true to name registry hosts in rules.");
  }

  @Test
  void ruleUpstreamsAreNotCheckedWithAnyUpstreamAllowedOrAuthOff() {
    assertThat(checked(ruleFor("own"))).isNull();
    assertThat(checked(ruleFor("*"))).isNull();
    Map<String, String> anyUpstream = ruleFor("registry.example.com");
    anyUpstream.put("registry-cache.allow-any-upstream", "true");
    assertThat(checked(anyUpstream)).isNull();
    Map<String, String> authOff = ruleFor("hub");
    authOff.put("registry-cache.auth.enabled", "false");
    assertThat(checked(authOff)).isNull();
  }

  @Test
  void aPolicyRuleNamingAnUnknownUpstreamUnlessAnyUpstreamIsAllowed() {
    Map<String, String> settings =
        new HashMap<>(
            Map.of(
                "registry-cache.upstreams.own.url", "http://localhost:5000",
                "registry-cache.policy.rules[0].upstreams", "own,hub",
                "registry-cache.policy.rules[0].repositories", "**",
                "registry-cache.policy.rules[0].platforms", "linux/amd64"));
    FailureAnalysis analysis =
        analysis(new SettingFailures.UnknownUpstreamAnalyzer(), checked(settings));
    assertThat(analysis.getDescription())
        .isEqualTo(
            "registry-cache.policy.rules[0].upstreams names upstream 'hub', which is not configured (upstream keys: own).");

    settings.put("registry-cache.policy.rules[0].upstreams", "own");
    assertThat(checked(settings)).isNull();
    settings.put("registry-cache.policy.rules[0].upstreams", "registry.example.com");
    settings.put("registry-cache.allow-any-upstream", "true");
    assertThat(checked(settings)).isNull();
  }

  @Test
  void aMissingSigningKeyFile() {
    Path missing = dir.resolve("cosign.pub");
    FailureAnalysis analysis =
        analysis(
            new SettingFailures.SettingFileAnalyzer(),
            checked(
                Map.of(
                    "registry-cache.policy.rules[0].repositories", "**",
                    "registry-cache.policy.rules[0].require", "signed",
                    "registry-cache.policy.rules[0].keys", missing.toString())));
    assertThat(analysis.getDescription())
        .isEqualTo(
            "registry-cache.policy.rules[0].keys[0] is " + missing + ", which does not exist.");
  }

  /** The signature policy's start with {@code keys} as rule 0's keys. */
  private static Throwable signaturePolicyWith(Path... keys) {
    Map<String, String> settings = new HashMap<>();
    settings.put("registry-cache.policy.rules[0].repositories", "**");
    settings.put("registry-cache.policy.rules[0].require", "signed");
    for (int i = 0; i < keys.length; i++) {
      settings.put("registry-cache.policy.rules[0].keys[" + i + "]", keys[i].toString());
    }
    RegistryCacheProperties properties = RegistryCacheProperties.bind(settings);
    assertThat(checked(settings)).as("the files exist and can be read").isNull();
    return catchThrowable(
        () ->
            new SignaturePolicy(
                properties.policy(), null, new SimpleMeterRegistry(), Clock.systemUTC()));
  }

  private Path pem(String name, java.security.Key key) throws IOException {
    StringWriter pem = new StringWriter();
    try (JcaPEMWriter writer = new JcaPEMWriter(pem)) {
      writer.writeObject(key);
    }
    return Files.writeString(dir.resolve(name), pem.toString());
  }

  @Test
  void aSigningKeyOfAKindNotAcceptedOrAPrivateKey() throws Exception {
    KeyPairGenerator p256 = KeyPairGenerator.getInstance("EC");
    p256.initialize(new ECGenParameterSpec("secp256r1"));
    KeyPairGenerator p384 = KeyPairGenerator.getInstance("EC");
    p384.initialize(new ECGenParameterSpec("secp384r1"));
    Path good = pem("good.pub", p256.generateKeyPair().getPublic());
    Path curve = pem("p384.pub", p384.generateKeyPair().getPublic());
    Path secret = pem("cosign.key", p256.generateKeyPair().getPrivate());

    assertThat(signaturePolicyWith(good)).isNull();
    FailureAnalysis analysis =
        analysis(new SettingFailures.SettingMessageAnalyzer(), signaturePolicyWith(good, curve));
    assertThat(analysis.getDescription())
        .startsWith("registry-cache.policy.rules[0].keys[1]: signing key " + curve + " is ECDSA")
        .endsWith("only P-256 is accepted.");
    analysis = analysis(new SettingFailures.SettingMessageAnalyzer(), signaturePolicyWith(secret));
    assertThat(analysis.getDescription())
        .startsWith("registry-cache.policy.rules[0].keys[0]: signing key " + secret)
        .contains("is not a public key");
  }

  @Test
  void aMissingHtpasswdFile() {
    Path missing = dir.resolve("users.htpasswd");
    FailureAnalysis analysis =
        analysis(
            new SettingFailures.SettingFileAnalyzer(),
            checked(
                Map.of(
                    "registry-cache.auth.enabled",
                    "true",
                    "registry-cache.auth.htpasswd-file",
                    missing.toString())));

    assertThat(analysis.getDescription())
        .isEqualTo("registry-cache.auth.htpasswd-file is " + missing + ", which does not exist.");
    assertThat(analysis.getAction())
        .isEqualTo(
            "Create it (java -jar registry-cache.jar htpasswd --user <name> --password-stdin >> "
                + missing
                + "), or set registry-cache.auth.htpasswd-file to an existing file.");
  }

  @Test
  void aFolderWhereAFileBelongs() throws IOException {
    Path folder = Files.createDirectory(dir.resolve("ca.pem"));
    FailureAnalysis analysis =
        analysis(
            new SettingFailures.SettingFileAnalyzer(),
            checked(
                Map.of(
                    "registry-cache.upstreams.x.url",
                    "https://registry.example.com",
                    "registry-cache.upstreams.x.tls.ca-file",
                    folder.toString())));

    assertThat(analysis.getDescription())
        .isEqualTo(
            "registry-cache.upstreams.x.tls.ca-file is "
                + folder
                + ", which is not a regular file.");
    assertThat(analysis.getAction())
        .isEqualTo("Create it, or set registry-cache.upstreams.x.tls.ca-file to an existing file.");
  }

  @Test
  void existingFilesPass() throws IOException {
    Path users = Files.writeString(dir.resolve("users.htpasswd"), "");
    assertThat(
            checked(
                Map.of(
                    "registry-cache.auth.enabled",
                    "true",
                    "registry-cache.auth.htpasswd-file",
                    users.toString())))
        .isNull();
  }

  @Test
  void aPortInUse() throws IOException {
    try (ServerSocket taken = new ServerSocket(0, 50, InetAddress.getLoopbackAddress())) {
      int port = taken.getLocalPort();
      Binder binder =
          new Binder(
              new MapConfigurationPropertySource(
                  Map.of(
                      "server.port",
                      "0",
                      "server.address",
                      "127.0.0.1",
                      "management.server.port",
                      String.valueOf(port))));
      FailureAnalysis analysis =
          analysis(
              new SettingFailures.ListenPortAnalyzer(),
              catchThrowable(() -> SettingsCheck.checkPorts(binder)));

      assertThat(analysis.getDescription())
          .isEqualTo("Port " + port + " (management.server.port) is already in use.");
      assertThat(analysis.getAction())
          .startsWith(
              "Stop the process that listens on port "
                  + port
                  + ", or set management.server.port to a free port");
    }
  }

  @Test
  void aPeerPortInUseWhenAClusterIsConfigured() throws IOException {
    try (ServerSocket taken = new ServerSocket()) {
      taken.bind(new InetSocketAddress(0));
      int port = taken.getLocalPort();
      Map<String, String> settings =
          new HashMap<>(
              Map.of("server.port", "0", "registry-cache.cluster.peer-port", String.valueOf(port)));
      assertThatCode(
              () ->
                  SettingsCheck.checkPorts(
                      new Binder(new MapConfigurationPropertySource(settings))))
          .as("no cluster: no peer port")
          .doesNotThrowAnyException();
      settings.put("registry-cache.cluster.peers", "a.example:" + port);

      assertThat(
              catchThrowable(
                  () ->
                      SettingsCheck.checkPorts(
                          new Binder(new MapConfigurationPropertySource(settings)))))
          .isInstanceOfSatisfying(
              SettingFailures.ListenPortException.class,
              e -> {
                assertThat(e.setting()).isEqualTo("registry-cache.cluster.peer-port");
                assertThat(e.inUse()).isTrue();
              });
    }
  }

  @Test
  void aValueThatDoesNotConvertNamesTheSettingAndTheValue() {
    Throwable failure =
        catchThrowable(
            () ->
                RegistryCacheProperties.bind(
                    Map.of(
                        "registry-cache.upstreams.x.url", "https://registry.example.com",
                        "registry-cache.upstreams.x.connect-timeout", "abc")));
    FailureAnalysis analysis = analysis(new SettingFailures.SettingValueAnalyzer(), failure);

    assertThat(analysis.getDescription())
        .startsWith("registry-cache.upstreams.x.connect-timeout is 'abc'")
        .endsWith(": 'abc' is not a valid duration.");
    assertThat(analysis.getAction()).startsWith("Correct the setting; README.md");
  }

  @Test
  void aValueARecordRefuses() {
    Throwable failure =
        catchThrowable(
            () -> RegistryCacheProperties.bind(Map.of("registry-cache.auth.realm", "a\"b")));
    FailureAnalysis analysis = analysis(new SettingFailures.SettingValueAnalyzer(), failure);

    assertThat(analysis.getDescription())
        .isEqualTo(
            "Invalid settings under registry-cache.auth: "
                + "registry-cache.auth.realm must be non-empty printable text without quotes or backslashes.");
  }

  @Test
  void aNegativeSendTimeout() {
    Throwable failure =
        catchThrowable(
            () -> RegistryCacheProperties.bind(Map.of("registry-cache.blobs.send-timeout", "-1s")));
    FailureAnalysis analysis = analysis(new SettingFailures.SettingValueAnalyzer(), failure);

    assertThat(analysis.getDescription())
        .isEqualTo(
            "Invalid settings under registry-cache.blobs: "
                + "registry-cache.blobs.send-timeout must be 0 (never) or more, got PT-1S.");
  }

  @Test
  void anyOtherRefusalThatNamesItsSetting() {
    FailureAnalysis analysis =
        analysis(
            new SettingFailures.SettingMessageAnalyzer(),
            new IllegalStateException(
                "registry-cache.auth.htpasswd-file /x cannot be used: line 2, user 'bob': only bcrypt hashes are accepted"));

    assertThat(analysis.getDescription())
        .isEqualTo(
            "registry-cache.auth.htpasswd-file /x cannot be used: line 2, user 'bob': only bcrypt hashes are accepted.");
    assertThat(
            new SettingFailures.SettingMessageAnalyzer()
                .analyze(new IllegalStateException("something else")))
        .as("not about a setting: left to Spring Boot")
        .isNull();
  }
}
