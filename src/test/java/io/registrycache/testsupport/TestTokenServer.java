package io.registrycache.testsupport;

import com.google.common.io.BaseEncoding;
import com.nimbusds.jose.JOSEException;
import com.nimbusds.jose.JOSEObjectType;
import com.nimbusds.jose.JWSAlgorithm;
import com.nimbusds.jose.JWSHeader;
import com.nimbusds.jose.crypto.ECDSASigner;
import com.nimbusds.jwt.JWTClaimsSet;
import com.nimbusds.jwt.SignedJWT;
import com.sun.net.httpserver.HttpExchange;
import com.sun.net.httpserver.HttpServer;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.net.InetSocketAddress;
import java.net.URLDecoder;
import java.nio.charset.StandardCharsets;
import java.security.MessageDigest;
import java.security.PublicKey;
import java.security.interfaces.ECPrivateKey;
import java.time.Instant;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Base64;
import java.util.Date;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.StringJoiner;
import java.util.UUID;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.function.BiFunction;

/**
 * A small token server for a {@code registry:2} with token authentication (distribution's "Token
 * Authentication Specification"), as the tests' upstream needs one: {@code GET /token?service=
 * &scope=repository:<name>:<actions>} with Basic credentials answers {@code {"token",
 * "access_token", "expires_in"}}; wrong credentials are 401; a scope the user may not have is left
 * out of the token (as Docker Hub does), so the registry then answers 401.
 *
 * <p>Tokens are ES256 JWTs signed by a P-256 key ({@link TestCertificate}), whose self-signed
 * certificate is the registry's {@code rootcertbundle} ({@link #rootCertificatePem}); the header's
 * {@code kid} is the key's libtrust ID (SHA-256 of the DER public key, first 30 bytes, base32 in
 * groups of four), which distribution 2.8 looks its trusted keys up by.
 */
public final class TestTokenServer implements AutoCloseable {

  public static final String ISSUER = "registry-cache-test-issuer";

  private final HttpServer server;
  private final ECPrivateKey key;
  private final String keyId;
  private final String rootCertificatePem;
  private final String service;

  /** (user, repository) → the actions granted, a subset of pull and push; empty for none. */
  private final BiFunction<String, String, List<String>> grants;

  private final Map<String, String> passwords;

  /** Every token request: user (or "-") and the scopes asked. */
  private final List<String> requests = new CopyOnWriteArrayList<>();

  /**
   * Starts on a free port of localhost.
   *
   * @param passwords user → password
   * @param grants (user, repository) → the actions the user may have there
   */
  public TestTokenServer(
      String service,
      Map<String, String> passwords,
      BiFunction<String, String, List<String>> grants) {
    this.service = service;
    this.passwords = Map.copyOf(passwords);
    this.grants = grants;
    try {
      TestCertificate issuer = TestCertificate.create("CN=" + ISSUER, null);
      this.key = (ECPrivateKey) issuer.privateKey();
      this.keyId = libtrustKeyId(issuer.certificate().getPublicKey());
      this.rootCertificatePem = issuer.pem();
      this.server = HttpServer.create(new InetSocketAddress("127.0.0.1", 0), 0);
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    } catch (Exception e) {
      throw new IllegalStateException(e);
    }
    server.createContext("/token", this::token);
    server.start();
  }

  /** libtrust's key ID, as distribution 2.8 indexes the keys of its root certificates. */
  static String libtrustKeyId(PublicKey key) throws Exception {
    byte[] hash = MessageDigest.getInstance("SHA-256").digest(key.getEncoded());
    String b32 = BaseEncoding.base32().omitPadding().encode(Arrays.copyOf(hash, 30));
    StringJoiner id = new StringJoiner(":");
    for (int i = 0; i < b32.length(); i += 4) {
      id.add(b32.substring(i, Math.min(b32.length(), i + 4)));
    }
    return id.toString();
  }

  /** {@code http://127.0.0.1:<port>/token}. */
  public String realm() {
    return "http://127.0.0.1:" + server.getAddress().getPort() + "/token";
  }

  public String service() {
    return service;
  }

  public String rootCertificatePem() {
    return rootCertificatePem;
  }

  /** The token requests so far, as {@code user scope...}. */
  public List<String> requests() {
    return List.copyOf(requests);
  }

  /**
   * A token for {@code user} granting {@code actions} on each of {@code repositories} (for
   * seeding).
   */
  public String token(String user, List<String> repositories, List<String> actions) {
    List<Map<String, Object>> access = new ArrayList<>();
    for (String repository : repositories) {
      access.add(Map.of("type", "repository", "name", repository, "actions", actions));
    }
    return signed(user, access);
  }

  private void token(HttpExchange exchange) throws IOException {
    try (exchange) {
      String user = null;
      String header = exchange.getRequestHeaders().getFirst("Authorization");
      if (header != null && header.startsWith("Basic ")) {
        String pair =
            new String(
                Base64.getDecoder().decode(header.substring(6).strip()), StandardCharsets.UTF_8);
        int colon = pair.indexOf(':');
        String name = pair.substring(0, colon);
        if (!pair.substring(colon + 1).equals(passwords.get(name))) {
          requests.add(name + " (wrong password)");
          exchange.sendResponseHeaders(401, -1);
          return;
        }
        user = name;
      }
      List<String> scopes = new ArrayList<>();
      String query = exchange.getRequestURI().getRawQuery();
      for (String parameter : query == null ? new String[0] : query.split("&")) {
        if (parameter.startsWith("scope=")) {
          scopes.add(URLDecoder.decode(parameter.substring(6), StandardCharsets.UTF_8));
        }
      }
      requests.add((user == null ? "-" : user) + " " + String.join(" ", scopes));
      Map<String, List<String>> granted = new LinkedHashMap<>();
      for (String scope : scopes) {
        String[] parts = scope.split(":");
        if (parts.length != 3 || !parts[0].equals("repository") || user == null) {
          continue;
        }
        List<String> allowed = grants.apply(user, parts[1]);
        List<String> actions =
            Arrays.stream(parts[2].split(",")).filter(allowed::contains).toList();
        if (!actions.isEmpty()) {
          granted.put(parts[1], actions);
        }
      }
      List<Map<String, Object>> access = new ArrayList<>();
      granted.forEach(
          (name, actions) ->
              access.add(Map.of("type", "repository", "name", name, "actions", actions)));
      String token = signed(user == null ? "" : user, access);
      byte[] body =
          ("{\"token\":\"" + token + "\",\"access_token\":\"" + token + "\",\"expires_in\":300}")
              .getBytes(StandardCharsets.UTF_8);
      exchange.getResponseHeaders().set("Content-Type", "application/json");
      exchange.sendResponseHeaders(200, body.length);
      exchange.getResponseBody().write(body);
    }
  }

  private String signed(String user, List<Map<String, Object>> access) {
    Instant now = Instant.now();
    JWTClaimsSet claims =
        new JWTClaimsSet.Builder()
            .issuer(ISSUER)
            .subject(user)
            .audience(service)
            .issueTime(Date.from(now.minusSeconds(5)))
            .notBeforeTime(Date.from(now.minusSeconds(5)))
            .expirationTime(Date.from(now.plusSeconds(300)))
            .jwtID(UUID.randomUUID().toString())
            .claim("access", access)
            .build();
    SignedJWT jwt =
        new SignedJWT(
            new JWSHeader.Builder(JWSAlgorithm.ES256).keyID(keyId).type(JOSEObjectType.JWT).build(),
            claims);
    try {
      jwt.sign(new ECDSASigner(key));
    } catch (JOSEException e) {
      throw new IllegalStateException(e);
    }
    return jwt.serialize();
  }

  @Override
  public void close() {
    server.stop(0);
  }
}
