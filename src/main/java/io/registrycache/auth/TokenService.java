package io.registrycache.auth;

import com.github.benmanes.caffeine.cache.Cache;
import com.github.benmanes.caffeine.cache.Caffeine;
import com.nimbusds.jose.JOSEException;
import com.nimbusds.jose.JWSAlgorithm;
import com.nimbusds.jose.JWSHeader;
import com.nimbusds.jose.JWSSigner;
import com.nimbusds.jose.crypto.ECDSASigner;
import com.nimbusds.jose.crypto.RSASSASigner;
import com.nimbusds.jose.jwk.Curve;
import com.nimbusds.jose.jwk.ECKey;
import com.nimbusds.jose.jwk.JWK;
import com.nimbusds.jose.jwk.JWKSet;
import com.nimbusds.jose.jwk.RSAKey;
import com.nimbusds.jose.jwk.gen.ECKeyGenerator;
import com.nimbusds.jose.jwk.source.ImmutableJWKSet;
import com.nimbusds.jose.proc.BadJOSEException;
import com.nimbusds.jose.proc.JWSVerificationKeySelector;
import com.nimbusds.jose.proc.SecurityContext;
import com.nimbusds.jwt.JWTClaimsSet;
import com.nimbusds.jwt.SignedJWT;
import com.nimbusds.jwt.proc.DefaultJWTClaimsVerifier;
import com.nimbusds.jwt.proc.DefaultJWTProcessor;
import io.registrycache.config.AuthProperties;
import io.registrycache.config.RegistryCacheProperties;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.security.GeneralSecurityException;
import java.security.KeyFactory;
import java.security.PrivateKey;
import java.security.interfaces.RSAPrivateCrtKey;
import java.security.interfaces.RSAPublicKey;
import java.security.spec.PKCS8EncodedKeySpec;
import java.security.spec.RSAPublicKeySpec;
import java.text.ParseException;
import java.time.Clock;
import java.time.Duration;
import java.time.Instant;
import java.util.Base64;
import java.util.Date;
import java.util.HashSet;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Optional;
import java.util.Set;
import java.util.UUID;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import org.springframework.beans.factory.annotation.Autowired;
import org.springframework.stereotype.Component;

/**
 * The cache's own token server's tokens: JWTs (RFC 7519) signed with ES256 or RS256 (RFC 7518
 * section 3) by nimbus-jose-jwt, in the shape of the distribution project's "Token Authentication
 * Implementation": {@code iss} and {@code aud} the service, {@code sub} the user or robot, {@code
 * iat}, {@code nbf}, {@code exp}, {@code jti}, and {@code access: [{"type": "repository", "name":
 * <name>, "actions": ["pull"]}]} for each repository granted; plus {@code kind} (user, robot or
 * anonymous). Verification ({@link #verify}) is nimbus-jose-jwt's {@link DefaultJWTProcessor}, as
 * for trusted issuers' tokens: only the configured algorithm and key (so {@code alg: none}, HMAC
 * with the public key and other keys are refused), this issuer and audience, and times within 60 s
 * of clock skew.
 */
@Component
public class TokenService {

  private static final Logger log = LoggerFactory.getLogger(TokenService.class);

  private final boolean enabled;
  private final AuthProperties.Token settings;
  private final Clock clock;
  private final JWSAlgorithm algorithm;
  private final JWSSigner signer;

  /** Verifies this service's tokens: signature by {@code key}, algorithm, claims. */
  private final DefaultJWTProcessor<SecurityContext> processor;

  private final String keyId;

  /**
   * With a pass-through upstream: the credentials given for each token still valid, by its {@code
   * jti}, in memory only, so that requests with the token can pass them to the upstream.
   */
  private final Cache<String, BasicCredentials> passed;

  /** Tokens verified lately (ES256 about 0.1 ms a check), shared with {@link ExternalTokens}. */
  private final TokenVerdicts verdicts;

  /** The clock skew {@link DefaultJWTClaimsVerifier} allows on {@code nbf} and {@code exp}. */
  private static final Duration SKEW =
      Duration.ofSeconds(DefaultJWTClaimsVerifier.DEFAULT_MAX_CLOCK_SKEW_SECONDS);

  /** A token as the token endpoint answers it. */
  public record Issued(String token, long expiresIn, Instant issuedAt) {
    @Override
    public String toString() {
      return "Issued[token=***, expiresIn=" + expiresIn + ", issuedAt=" + issuedAt + "]";
    }
  }

  @Autowired
  public TokenService(RegistryCacheProperties properties) {
    this(properties, Clock.systemUTC());
  }

  TokenService(RegistryCacheProperties properties, Clock clock) {
    this.settings = properties.auth().token();
    this.enabled = properties.auth().enabled() && settings.enabled();
    this.clock = clock;
    this.passed =
        properties.upstreams().upstreams().values().stream().anyMatch(u -> u.passthrough())
            ? Caffeine.newBuilder()
                .expireAfterWrite(settings.ttl().plusSeconds(60)) // verify() allows 60 s of skew
                .maximumSize(100_000)
                .<String, BasicCredentials>build()
            : null;
    this.verdicts = new TokenVerdicts(clock);
    if (settings.enabled() && !properties.auth().enabled()) {
      log.warn(
          "registry-cache.auth.token.enabled is set but registry-cache.auth.enabled is not: no token flow");
    }
    if (!enabled) {
      this.algorithm = null;
      this.signer = null;
      this.processor = null;
      this.keyId = null;
      return;
    }
    JWK key = key(settings);
    this.keyId = key.getKeyID();
    try {
      if (key instanceof ECKey ec) {
        if (!Curve.P_256.equals(ec.getCurve())) {
          throw new IllegalStateException(
              "registry-cache.auth.token.key-file: an EC key must be on P-256 (ES256)");
        }
        this.algorithm = JWSAlgorithm.ES256;
        this.signer = new ECDSASigner(ec);
      } else if (key instanceof RSAKey rsa) {
        if (rsa.size() < 2048) {
          throw new IllegalStateException(
              "registry-cache.auth.token.key-file: an RSA key must have 2048 bits or more");
        }
        this.algorithm = JWSAlgorithm.RS256;
        this.signer = new RSASSASigner(rsa);
      } else {
        throw new IllegalStateException(
            "registry-cache.auth.token.key-file: an EC P-256 or RSA private key is needed");
      }
    } catch (JOSEException e) {
      throw new IllegalStateException(
          "registry-cache.auth.token.key-file cannot be used: " + e.getMessage(), e);
    }
    this.processor = processor(key.toPublicJWK(), algorithm, settings.service(), clock);
    log.info(
        "Token server on: {} tokens of service '{}', valid {}",
        algorithm,
        settings.service(),
        settings.ttl());
  }

  private static JWK key(AuthProperties.Token settings) {
    if (settings.keyFile() == null) {
      log.warn(
          "registry-cache.auth.token.key-file is not set: tokens are signed with a key made at start-up; "
              + "they become invalid when the process restarts and replicas do not accept each other's");
      try {
        return new ECKeyGenerator(Curve.P_256).keyID(UUID.randomUUID().toString()).generate();
      } catch (JOSEException e) {
        throw new IllegalStateException(e);
      }
    }
    try {
      String text = Files.readString(settings.keyFile(), StandardCharsets.UTF_8).strip();
      JWK key;
      if (text.startsWith("{")) {
        key = JWK.parse(text);
      } else if (text.startsWith("-----BEGIN PRIVATE KEY-----")
          && text.endsWith("-----END PRIVATE KEY-----")) {
        byte[] der =
            Base64.getMimeDecoder()
                .decode(
                    text.substring(
                        "-----BEGIN PRIVATE KEY-----".length(),
                        text.length() - "-----END PRIVATE KEY-----".length()));
        PrivateKey parsed =
            KeyFactory.getInstance("RSA").generatePrivate(new PKCS8EncodedKeySpec(der));
        if (!(parsed instanceof RSAPrivateCrtKey crt)) {
          throw new IllegalStateException("not an RSA private key with CRT parameters");
        }
        RSAPublicKey publicKey =
            (RSAPublicKey)
                KeyFactory.getInstance("RSA")
                    .generatePublic(
                        new RSAPublicKeySpec(crt.getModulus(), crt.getPublicExponent()));
        key = new RSAKey.Builder(publicKey).privateKey(crt).keyIDFromThumbprint().build();
      } else {
        throw new IllegalStateException(
            "expected a PKCS#8 PEM RSA key (BEGIN PRIVATE KEY; openssl genpkey -algorithm RSA"
                + " -pkeyopt rsa_keygen_bits:3072) or a private JWK (JSON, EC P-256 or RSA)");
      }
      if (!key.isPrivate()) {
        throw new IllegalStateException("it holds no private key");
      }
      return key.getKeyID() != null ? key : withThumbprintId(key);
    } catch (IOException
        | ParseException
        | JOSEException
        | GeneralSecurityException
        | IllegalArgumentException
        | IllegalStateException e) {
      throw new IllegalStateException(
          "registry-cache.auth.token.key-file "
              + settings.keyFile()
              + " cannot be used: "
              + e.getMessage(),
          e);
    }
  }

  private static DefaultJWTProcessor<SecurityContext> processor(
      JWK publicKey, JWSAlgorithm algorithm, String service, Clock clock) {
    DefaultJWTProcessor<SecurityContext> processor = new DefaultJWTProcessor<>();
    processor.setJWSKeySelector(
        new JWSVerificationKeySelector<>(algorithm, new ImmutableJWKSet<>(new JWKSet(publicKey))));
    DefaultJWTClaimsVerifier<SecurityContext> claims =
        new DefaultJWTClaimsVerifier<>(
            service,
            new JWTClaimsSet.Builder().issuer(service).build(),
            new HashSet<>(List.of("sub", "exp", "iat", "kind"))) {
          @Override
          protected Date currentTime() {
            return Date.from(clock.instant());
          }
        };
    processor.setJWTClaimsSetVerifier(claims);
    return processor;
  }

  private static JWK withThumbprintId(JWK key) throws JOSEException {
    String id = key.computeThumbprint().toString();
    if (key instanceof ECKey ec) {
      return new ECKey.Builder(ec).keyID(id).build();
    }
    if (key instanceof RSAKey rsa) {
      return new RSAKey.Builder(rsa).keyID(id).build();
    }
    return key;
  }

  /**
   * Whether the token flow is on ({@code registry-cache.auth.enabled} and {@code
   * auth.token.enabled}).
   */
  public boolean enabled() {
    return enabled;
  }

  /** The {@code service} of challenges and tokens. */
  public String service() {
    return settings.service();
  }

  /** The configured realm URL, if any. */
  public Optional<String> realm() {
    return Optional.ofNullable(settings.realm());
  }

  /**
   * A token for {@code identity} granting {@code pull} of {@code repositories} (names as the client
   * asked for them, already authorised).
   */
  public Issued issue(Identity identity, Set<String> repositories) {
    return issue(identity, repositories, null);
  }

  /**
   * As {@link #issue(Identity, Set)}; with an upstream that takes each client's own credentials
   * ({@code credentials: passthrough}), {@code given} (the user name and password the client gave
   * for the token, or {@code null}) is kept in memory under the token's {@code jti} until it
   * expires, for {@link #passedCredentials}. Never written anywhere, never in the token.
   */
  public Issued issue(Identity identity, Set<String> repositories, BasicCredentials given) {
    Instant now = clock.instant();
    Instant expires = now.plus(settings.ttl());
    List<Map<String, Object>> access =
        repositories.stream()
            .sorted()
            .map(
                name ->
                    Map.<String, Object>of(
                        "type", "repository", "name", name, "actions", List.of("pull")))
            .toList();
    JWTClaimsSet claims =
        new JWTClaimsSet.Builder()
            .issuer(settings.service())
            .audience(settings.service())
            .subject(identity.name())
            .issueTime(Date.from(now))
            .notBeforeTime(Date.from(now))
            .expirationTime(Date.from(expires))
            .jwtID(UUID.randomUUID().toString())
            .claim("kind", identity.kind().name().toLowerCase(Locale.ROOT))
            .claim("access", access)
            .build();
    SignedJWT jwt = new SignedJWT(new JWSHeader.Builder(algorithm).keyID(keyId).build(), claims);
    try {
      jwt.sign(signer);
    } catch (JOSEException e) {
      throw new IllegalStateException("signing a token failed", e);
    }
    if (passed != null
        && given != null
        && !(given.user().isEmpty() && given.password().isEmpty())) {
      passed.put(claims.getJWTID(), given);
    }
    return new Issued(jwt.serialize(), Duration.between(now, expires).toSeconds(), now);
  }

  /**
   * The credentials the client gave for {@code token} ({@link #issue(Identity, Set,
   * BasicCredentials)}), to pass to a pass-through upstream.
   *
   * @return empty when the token is not valid ({@link #verify}); an empty inner value when it is
   *     valid but was given without credentials, or they are no longer held (the process restarted,
   *     or no upstream is pass-through)
   */
  public Optional<Optional<BasicCredentials>> passedCredentials(String token) {
    Optional<TokenVerdicts.Verdict> verdict = verdict(token);
    if (verdict.isEmpty()) {
      return Optional.empty();
    }
    String id = verdict.get().jwtId();
    return Optional.of(
        Optional.ofNullable(passed == null || id == null ? null : passed.getIfPresent(id)));
  }

  /**
   * The identity a bearer token stands for, with the repositories it grants {@code pull} of:
   * verified by nimbus-jose-jwt's {@link DefaultJWTProcessor} (the configured algorithm and key,
   * this service as {@code iss} and {@code aud}, {@code sub}, {@code exp}, {@code iat} and {@code
   * kind} present, {@code exp} and {@code nbf} within {@link #SKEW}), then remembered in {@link
   * TokenVerdicts} while it is valid.
   *
   * @return empty when the token is malformed, not signed with this service's algorithm and key, of
   *     another issuer or audience, expired or not yet valid
   */
  public Optional<Identity> verify(String token) {
    return verdict(token).map(TokenVerdicts.Verdict::identity);
  }

  private Optional<TokenVerdicts.Verdict> verdict(String token) {
    if (!enabled || token.length() > Credentials.MAX_HEADER_LENGTH) {
      return Optional.empty();
    }
    TokenVerdicts.Verdict known = verdicts.remembered(token);
    if (known != null) {
      // the cache is shared with trusted issuers' tokens: theirs are not this service's
      return known.identity().kind() == Identity.Kind.ISSUER
          ? Optional.empty()
          : Optional.of(known);
    }
    try {
      JWTClaimsSet claims = processor.process(token, null);
      Identity.Kind kind =
          Identity.Kind.valueOf(claims.getStringClaim("kind").toUpperCase(Locale.ROOT));
      if (kind == Identity.Kind.ISSUER) {
        return Optional.empty(); // never issued: an issuer's subject gets no token of this service
      }
      Set<String> pullable = new LinkedHashSet<>();
      List<Object> access = claims.getListClaim("access");
      if (access != null) {
        for (Object entry : access) {
          if (entry instanceof Map<?, ?> map
              && "repository".equals(map.get("type"))
              && map.get("name") instanceof String name
              && map.get("actions") instanceof List<?> actions
              && actions.contains("pull")) {
            pullable.add(name);
          }
        }
      }
      TokenVerdicts.Verdict verdict =
          new TokenVerdicts.Verdict(
              new Identity(kind, claims.getSubject(), pullable),
              claims.getJWTID(),
              claims.getNotBeforeTime() == null
                  ? Instant.MIN
                  : claims.getNotBeforeTime().toInstant().minus(SKEW),
              claims.getExpirationTime().toInstant().plus(SKEW));
      verdicts.remember(token, verdict);
      return Optional.of(verdict);
    } catch (ParseException
        | BadJOSEException
        | JOSEException
        | IllegalArgumentException
        | ClassCastException e) {
      return Optional.empty();
    }
  }

  /**
   * The cache of token verdicts, shared with the trusted issuers' tokens ({@link ExternalTokens}).
   */
  TokenVerdicts verdicts() {
    return verdicts;
  }
}
