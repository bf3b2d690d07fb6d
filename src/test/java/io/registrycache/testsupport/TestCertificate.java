package io.registrycache.testsupport;

import java.io.IOException;
import java.io.InputStream;
import java.io.UncheckedIOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.security.GeneralSecurityException;
import java.security.KeyStore;
import java.security.PrivateKey;
import java.security.cert.Certificate;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Base64;
import java.util.List;
import javax.net.ssl.KeyManagerFactory;
import javax.net.ssl.SSLContext;

/**
 * A self-signed server certificate for {@code 127.0.0.1} and {@code localhost} (an EC P-256 key,
 * valid two days), made by the JDK's {@code keytool}: the key of a test HTTPS server ({@link
 * #serverContext}, {@link ScriptedHttp#httpsServer}) and, as PEM, the CA file a client trusts it
 * with ({@link #pem}, {@link #writePem}).
 */
public final class TestCertificate {

  private static final String ALIAS = "server";
  private static final char[] PASSWORD = "changeit".toCharArray();

  private final KeyStore keyStore;

  private TestCertificate(KeyStore keyStore) {
    this.keyStore = keyStore;
  }

  /** A new key and certificate, in a PKCS12 key store under a new temporary folder. */
  public static TestCertificate create() {
    return create("CN=127.0.0.1", "SAN=ip:127.0.0.1,dns:localhost");
  }

  /**
   * A new EC P-256 key and self-signed certificate (SHA256withECDSA) for {@code distinguishedName},
   * with the {@code keytool -ext} extension {@code extension} (e.g. {@code SAN=dns:localhost}), or
   * none when null.
   */
  public static TestCertificate create(String distinguishedName, String extension) {
    Path store = TestFiles.tempDirectory("test-certificate-").resolve("server.p12");
    String keytool = Path.of(System.getProperty("java.home"), "bin", "keytool").toString();
    List<String> command =
        new ArrayList<>(
            List.of(
                keytool,
                "-genkeypair",
                "-alias",
                ALIAS,
                "-keyalg",
                "EC",
                "-groupname",
                "secp256r1",
                "-sigalg",
                "SHA256withECDSA",
                "-dname",
                distinguishedName,
                "-validity",
                "2",
                "-storetype",
                "PKCS12",
                "-keystore",
                store.toString(),
                "-storepass",
                new String(PASSWORD),
                "-keypass",
                new String(PASSWORD)));
    if (extension != null) {
      command.addAll(List.of("-ext", extension));
    }
    Command.run(Duration.ofSeconds(60), command).assertSuccess();
    try (InputStream in = Files.newInputStream(store)) {
      KeyStore keyStore = KeyStore.getInstance("PKCS12");
      keyStore.load(in, PASSWORD);
      return new TestCertificate(keyStore);
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    } catch (GeneralSecurityException e) {
      throw new IllegalStateException(e);
    }
  }

  /** A TLS context that presents this certificate, for a server. */
  public SSLContext serverContext() {
    try {
      KeyManagerFactory keys =
          KeyManagerFactory.getInstance(KeyManagerFactory.getDefaultAlgorithm());
      keys.init(keyStore, PASSWORD);
      SSLContext context = SSLContext.getInstance("TLS");
      context.init(keys.getKeyManagers(), null, null);
      return context;
    } catch (GeneralSecurityException e) {
      throw new IllegalStateException(e);
    }
  }

  /** The certificate. */
  public Certificate certificate() {
    try {
      return keyStore.getCertificate(ALIAS);
    } catch (GeneralSecurityException e) {
      throw new IllegalStateException(e);
    }
  }

  /** The certificate's private key. */
  public PrivateKey privateKey() {
    try {
      return (PrivateKey) keyStore.getKey(ALIAS, PASSWORD);
    } catch (GeneralSecurityException e) {
      throw new IllegalStateException(e);
    }
  }

  /** The certificate, PEM-encoded ({@code -----BEGIN CERTIFICATE-----}). */
  public String pem() {
    try {
      return "-----BEGIN CERTIFICATE-----\n"
          + Base64.getMimeEncoder(64, "\n".getBytes(StandardCharsets.US_ASCII))
              .encodeToString(certificate().getEncoded())
          + "\n-----END CERTIFICATE-----\n";
    } catch (GeneralSecurityException e) {
      throw new IllegalStateException(e);
    }
  }

  /** Writes {@link #pem} to {@code file} and returns it. */
  public Path writePem(Path file) {
    try {
      return Files.writeString(file, pem());
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
  }
}
