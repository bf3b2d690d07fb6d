package io.registrycache.upstream;

import io.netty.handler.ssl.SslContext;
import io.netty.handler.ssl.SslContextBuilder;
import io.netty.handler.ssl.util.InsecureTrustManagerFactory;
import io.registrycache.config.UpstreamProperties;
import java.io.IOException;
import java.io.InputStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.security.GeneralSecurityException;
import java.security.KeyFactory;
import java.security.KeyStore;
import java.security.PrivateKey;
import java.security.cert.Certificate;
import java.security.cert.CertificateFactory;
import java.security.cert.X509Certificate;
import java.security.spec.PKCS8EncodedKeySpec;
import java.util.ArrayList;
import java.util.Base64;
import java.util.Collection;
import java.util.List;
import javax.net.ssl.KeyManagerFactory;
import javax.net.ssl.TrustManagerFactory;
import javax.net.ssl.X509TrustManager;

/**
 * The TLS material of one upstream, built once from its {@code tls.*} settings and used for
 * registry and token requests alike (both go through the upstream's Reactor Netty client).
 *
 * <p>Trust is the JVM's default CAs plus the PEM {@code ca-file}; a client certificate ({@code
 * cert-file}, PEM chain) with its PEM PKCS#8 {@code key-file} enables mutual TLS. {@code
 * insecure-skip-verify} turns off certificate and host name verification.
 */
final class UpstreamTls {

  private final TrustManagerFactory trustManagers;
  private final KeyManagerFactory keyManagers;
  private final boolean insecureSkipVerify;

  private UpstreamTls(
      TrustManagerFactory trustManagers,
      KeyManagerFactory keyManagers,
      boolean insecureSkipVerify) {
    this.trustManagers = trustManagers;
    this.keyManagers = keyManagers;
    this.insecureSkipVerify = insecureSkipVerify;
  }

  /**
   * Reads the TLS files of an upstream.
   *
   * @throws IllegalStateException naming the upstream and the file when a file is missing or not
   *     valid PEM, or only one of {@code cert-file} and {@code key-file} is set
   */
  static UpstreamTls from(String upstreamKey, UpstreamProperties.Tls tls) {
    String prefix = "registry-cache.upstreams." + upstreamKey + ".tls.";
    try {
      TrustManagerFactory trust = null;
      if (tls.insecureSkipVerify()) {
        trust = InsecureTrustManagerFactory.INSTANCE;
      } else if (tls.caFile() != null) {
        trust = trustWithExtraCas(readCertificates(tls.caFile(), prefix + "ca-file"));
      }
      KeyManagerFactory keys = null;
      if ((tls.certFile() == null) != (tls.keyFile() == null)) {
        throw new IllegalStateException(
            prefix + "cert-file and " + prefix + "key-file go together");
      }
      if (tls.certFile() != null) {
        List<X509Certificate> chain = readCertificates(tls.certFile(), prefix + "cert-file");
        PrivateKey key =
            readPkcs8Key(
                tls.keyFile(), chain.get(0).getPublicKey().getAlgorithm(), prefix + "key-file");
        keys = keyManagers(chain, key);
      }
      return new UpstreamTls(trust, keys, tls.insecureSkipVerify());
    } catch (GeneralSecurityException e) {
      throw new IllegalStateException(prefix + "*: " + e.getMessage(), e);
    }
  }

  boolean insecureSkipVerify() {
    return insecureSkipVerify;
  }

  /**
   * True when no {@code tls.*} setting is made: the JVM's CAs, verification on, no client
   * certificate.
   */
  boolean isJvmDefault() {
    return trustManagers == null && keyManagers == null && !insecureSkipVerify;
  }

  /** Netty client context for Reactor Netty. */
  SslContext nettyContext() {
    try {
      SslContextBuilder builder = SslContextBuilder.forClient();
      if (trustManagers != null) {
        builder.trustManager(trustManagers);
      }
      if (keyManagers != null) {
        builder.keyManager(keyManagers);
      }
      if (insecureSkipVerify) {
        // A trust-all manager alone still gets the JDK's host name check; switch that off too.
        builder.endpointIdentificationAlgorithm(null);
      }
      return builder.build();
    } catch (IOException e) {
      throw new IllegalStateException("cannot build the TLS context: " + e.getMessage(), e);
    }
  }

  private static TrustManagerFactory trustWithExtraCas(List<X509Certificate> extra)
      throws GeneralSecurityException {
    TrustManagerFactory jvm =
        TrustManagerFactory.getInstance(TrustManagerFactory.getDefaultAlgorithm());
    jvm.init((KeyStore) null);
    KeyStore store = KeyStore.getInstance(KeyStore.getDefaultType());
    try {
      store.load(null, null);
    } catch (IOException e) {
      throw new GeneralSecurityException(e);
    }
    int i = 0;
    for (var tm : jvm.getTrustManagers()) {
      if (tm instanceof X509TrustManager x509) {
        for (X509Certificate ca : x509.getAcceptedIssuers()) {
          store.setCertificateEntry("jvm-" + i++, ca);
        }
      }
    }
    for (X509Certificate ca : extra) {
      store.setCertificateEntry("ca-file-" + i++, ca);
    }
    TrustManagerFactory combined =
        TrustManagerFactory.getInstance(TrustManagerFactory.getDefaultAlgorithm());
    combined.init(store);
    return combined;
  }

  private static KeyManagerFactory keyManagers(List<X509Certificate> chain, PrivateKey key)
      throws GeneralSecurityException {
    char[] password = "registry-cache".toCharArray(); // in-memory store only
    KeyStore store = KeyStore.getInstance("PKCS12");
    try {
      store.load(null, null);
    } catch (IOException e) {
      throw new GeneralSecurityException(e);
    }
    store.setKeyEntry("client", key, password, chain.toArray(new Certificate[0]));
    KeyManagerFactory factory =
        KeyManagerFactory.getInstance(KeyManagerFactory.getDefaultAlgorithm());
    factory.init(store, password);
    return factory;
  }

  static List<X509Certificate> readCertificates(Path file, String setting) {
    try (InputStream in = Files.newInputStream(file)) {
      Collection<? extends Certificate> certs =
          CertificateFactory.getInstance("X.509").generateCertificates(in);
      List<X509Certificate> result = new ArrayList<>();
      certs.forEach(c -> result.add((X509Certificate) c));
      if (result.isEmpty()) {
        throw new IllegalStateException(setting + " " + file + " holds no PEM certificate");
      }
      return result;
    } catch (IOException | GeneralSecurityException e) {
      throw new IllegalStateException(
          setting + " " + file + " is not readable as PEM certificates: " + e.getMessage(), e);
    }
  }

  static PrivateKey readPkcs8Key(Path file, String algorithm, String setting) {
    String pem;
    try {
      pem = Files.readString(file, StandardCharsets.US_ASCII);
    } catch (IOException e) {
      throw new IllegalStateException(
          setting + " " + file + " is not readable: " + e.getMessage(), e);
    }
    int begin = pem.indexOf("-----BEGIN PRIVATE KEY-----");
    int end = pem.indexOf("-----END PRIVATE KEY-----");
    if (begin < 0 || end < begin) {
      // Never echo the file content: it is a secret.
      throw new IllegalStateException(
          setting + " " + file + " must hold a PEM PKCS#8 key (-----BEGIN PRIVATE KEY-----)");
    }
    String base64 = pem.substring(begin + 27, end).replaceAll("\\s", "");
    try {
      byte[] der = Base64.getDecoder().decode(base64);
      return KeyFactory.getInstance(algorithm).generatePrivate(new PKCS8EncodedKeySpec(der));
    } catch (IllegalArgumentException | GeneralSecurityException e) {
      throw new IllegalStateException(
          setting + " " + file + " is not a valid " + algorithm + " PKCS#8 key matching cert-file",
          e);
    }
  }
}
