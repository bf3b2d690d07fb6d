package io.registrycache.auth;

import com.nimbusds.jose.JOSEException;
import com.nimbusds.jose.JOSEObjectType;
import com.nimbusds.jose.JWSAlgorithm;
import com.nimbusds.jose.KeySourceException;
import com.nimbusds.jose.jwk.JWKSet;
import com.nimbusds.jose.jwk.source.JWKSource;
import com.nimbusds.jose.jwk.source.JWKSourceBuilder;
import com.nimbusds.jose.jwk.source.RateLimitReachedException;
import com.nimbusds.jose.proc.BadJOSEException;
import com.nimbusds.jose.proc.DefaultJOSEObjectTypeVerifier;
import com.nimbusds.jose.proc.JWSVerificationKeySelector;
import com.nimbusds.jose.proc.SecurityContext;
import com.nimbusds.jose.util.DefaultResourceRetriever;
import com.nimbusds.jwt.JWTClaimsSet;
import com.nimbusds.jwt.SignedJWT;
import com.nimbusds.jwt.proc.DefaultJWTClaimsVerifier;
import com.nimbusds.jwt.proc.DefaultJWTProcessor;
import io.registrycache.config.AuthProperties;
import io.registrycache.config.RegistryCacheProperties;
import java.net.MalformedURLException;
import java.text.ParseException;
import java.time.Clock;
import java.time.Instant;
import java.util.Date;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Optional;
import java.util.Set;
import java.util.function.LongSupplier;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Bearer JWTs (RFC 7519) of the external issuers the operator trusts ({@code
 * registry-cache.auth.trusted-issuers}), their subjects named {@code jwt:<issuer-key>/<subject>},
 * verified by nimbus-jose-jwt's {@link DefaultJWTProcessor}: a token is tried against each trusted
 * issuer whose {@code issuer} equals its (yet unverified) {@code iss}; it must be signed with
 * {@link #ALGORITHMS} by the key of its header's {@code kid} in that issuer's JWK set, carry
 * exactly that {@code iss}, name the issuer's {@code audience} in {@code aud}, have an {@code exp}
 * and be within {@code exp} and {@code nbf} give or take {@link #CLOCK_SKEW_SECONDS}, and carry a
 * non-empty string in the issuer's identity claim. {@code typ}, when present, must be {@code JWT}
 * or {@code at+jwt} (RFC 9068).
 *
 * <p>The JWK set comes from a file ({@link WatchedFile}: read again when it changes) or a URL
 * (nimbus' {@link JWKSourceBuilder}: cached for {@code jwks-cache-ttl}, fetched again when a token
 * names a {@code kid} the cached set lacks, at most twice per {@link #JWKS_RATE_LIMIT_MILLIS}, each
 * fetch bounded by {@code jwks-timeout} and 512 KiB). {@link #verify} may therefore block on the
 * network: call it off event-loop threads. Tokens are never logged; a refusal is logged at debug
 * with the reason and the issuer only.
 */
public final class ExternalTokens {

  /** The signature algorithms accepted (RFC 7518 section 3), as for the cache's own tokens. */
  public static final Set<JWSAlgorithm> ALGORITHMS = Set.of(JWSAlgorithm.RS256, JWSAlgorithm.ES256);

  /** Clock skew allowed on {@code exp} and {@code nbf}, in seconds. */
  public static final int CLOCK_SKEW_SECONDS = 60;

  /** A {@code jwks-url} is fetched at most twice within this many milliseconds. */
  static final long JWKS_RATE_LIMIT_MILLIS = 30_000;

  /** The largest JWK set document accepted from a {@code jwks-url}, in bytes. */
  static final int JWKS_SIZE_LIMIT = 512 * 1024;

  /** The longest identity or group name accepted from a token, in characters. */
  static final int MAX_NAME_LENGTH = 256;

  private static final Logger log = LoggerFactory.getLogger(ExternalTokens.class);

  private record Trusted(
      AuthProperties.TrustedIssuer settings, DefaultJWTProcessor<SecurityContext> processor) {}

  private final List<Trusted> issuers;
  private final TokenVerdicts verdicts;

  /**
   * Sets up the trusted issuers; with {@code registry-cache.auth.enabled} off, none.
   *
   * @throws IllegalStateException when a {@code jwks-file} cannot be read or holds no JWK set
   */
  public ExternalTokens(RegistryCacheProperties properties) {
    this(properties, Clock.systemUTC(), System::nanoTime);
  }

  /**
   * As {@link #ExternalTokens(RegistryCacheProperties)}, remembering verdicts in {@code verdicts}
   * (shared with {@link TokenService}).
   */
  ExternalTokens(RegistryCacheProperties properties, TokenVerdicts verdicts) {
    this(properties, Clock.systemUTC(), System::nanoTime, verdicts);
  }

  /**
   * @param clock the time {@code exp} and {@code nbf} are judged at
   * @param nanoTime when a {@code jwks-file} is looked at again ({@link WatchedFile})
   */
  ExternalTokens(RegistryCacheProperties properties, Clock clock, LongSupplier nanoTime) {
    this(properties, clock, nanoTime, new TokenVerdicts(clock));
  }

  private ExternalTokens(
      RegistryCacheProperties properties,
      Clock clock,
      LongSupplier nanoTime,
      TokenVerdicts verdicts) {
    this.verdicts = verdicts;
    List<AuthProperties.TrustedIssuer> configured = properties.auth().trustedIssuers();
    if (!properties.auth().enabled()) {
      if (!configured.isEmpty()) {
        log.warn(
            "registry-cache.auth.trusted-issuers is set but registry-cache.auth.enabled is not: not used");
      }
      this.issuers = List.of();
      return;
    }
    this.issuers =
        configured.stream()
            .map(settings -> new Trusted(settings, processor(settings, clock, nanoTime)))
            .toList();
    for (AuthProperties.TrustedIssuer settings : configured) {
      log.info(
          "Trusted token issuer '{}' as jwt:{}/<subject> (audience '{}', keys from {})",
          settings.issuer(),
          settings.key(),
          settings.audience(),
          settings.jwksFile() != null ? settings.jwksFile() : settings.jwksUrl());
    }
  }

  /** Whether any external issuer is trusted. */
  public boolean enabled() {
    return !issuers.isEmpty();
  }

  /**
   * Whether {@code token} claims to come from a trusted issuer: its {@code iss}, read without
   * verifying anything, is one. Cheap, never blocks.
   */
  public boolean claimsTrustedIssuer(String token) {
    if (issuers.isEmpty()) {
      // no parse: with the token flow on, every request's bearer token comes here first
      return false;
    }
    return unverifiedIssuer(token)
        .map(iss -> issuers.stream().anyMatch(t -> t.settings().issuer().equals(iss)))
        .orElse(false);
  }

  /**
   * The user a bearer token of a trusted issuer stands for. May block: a {@code jwks-url} is
   * fetched when its cached set is stale or lacks the token's {@code kid}.
   *
   * @return a {@link Identity.Kind#ISSUER} identity named by the issuer's key and identity claim
   *     ({@code jwt:<key>/<subject>}), with the groups of its groups claim; remembered in {@link
   *     TokenVerdicts} while valid; empty when no trusted issuer has the token's {@code iss}, or
   *     the token is malformed, signed otherwise (another key, an unknown {@code kid}, another
   *     algorithm, {@code alg: none}), of another audience, expired, not yet valid, or lacks the
   *     identity claim; also when the JWK set cannot be fetched
   */
  public Optional<Identity> verify(String token) {
    if (issuers.isEmpty() || token.length() > Credentials.MAX_HEADER_LENGTH) {
      return Optional.empty();
    }
    TokenVerdicts.Verdict known = verdicts.remembered(token);
    if (known != null) {
      return known.identity().kind() == Identity.Kind.ISSUER
          ? Optional.of(known.identity())
          : Optional.empty();
    }
    Optional<String> iss = unverifiedIssuer(token);
    if (iss.isEmpty()) {
      return Optional.empty();
    }
    for (Trusted trusted : issuers) {
      if (!trusted.settings().issuer().equals(iss.get())) {
        continue;
      }
      try {
        JWTClaimsSet claims = trusted.processor().process(token, null);
        Optional<Identity> identity = identity(trusted.settings(), claims);
        if (identity.isPresent()) {
          verdicts.remember(
              token,
              new TokenVerdicts.Verdict(
                  identity.get(),
                  claims.getJWTID(),
                  claims.getNotBeforeTime() == null
                      ? Instant.MIN
                      : claims.getNotBeforeTime().toInstant().minusSeconds(CLOCK_SKEW_SECONDS),
                  claims.getExpirationTime().toInstant().plusSeconds(CLOCK_SKEW_SECONDS)));
          return identity;
        }
      } catch (RateLimitReachedException e) {
        // An unknown kid while the URL was fetched twice lately: not logged louder, as anyone may
        // send one.
        log.debug(
            "A bearer token of issuer '{}' is refused: its kid is unknown and the JWK set was fetched lately",
            iss.get());
      } catch (KeySourceException e) {
        log.warn("The JWK set of trusted issuer '{}' cannot be had: {}", iss.get(), e.getMessage());
      } catch (ParseException | BadJOSEException | JOSEException | RuntimeException e) {
        log.debug("A bearer token of issuer '{}' is refused: {}", iss.get(), e.getMessage());
      }
    }
    return Optional.empty();
  }

  private static Optional<Identity> identity(
      AuthProperties.TrustedIssuer settings, JWTClaimsSet claims) {
    if (!(claims.getClaim(settings.identityClaim()) instanceof String name)
        || !acceptableName(name)) {
      log.debug(
          "A bearer token of issuer '{}' is refused: claim '{}' is not a name",
          settings.issuer(),
          settings.identityClaim());
      return Optional.empty();
    }
    Set<String> groups = new LinkedHashSet<>();
    Object listed = settings.groupsClaim() == null ? null : claims.getClaim(settings.groupsClaim());
    if (listed instanceof String one && acceptableName(one)) {
      groups.add(one);
    } else if (listed instanceof List<?> many) {
      for (Object group : many) {
        if (group instanceof String g && acceptableName(g)) {
          groups.add(g);
        }
      }
    }
    return Optional.of(Identity.external(settings.key(), name, groups));
  }

  /** A name fit for rules and logs: non-empty, bounded, printable. */
  private static boolean acceptableName(String name) {
    return !name.isEmpty()
        && name.length() <= MAX_NAME_LENGTH
        && name.chars().noneMatch(c -> c < 0x20 || c == 0x7f);
  }

  private static Optional<String> unverifiedIssuer(String token) {
    try {
      return Optional.ofNullable(SignedJWT.parse(token).getJWTClaimsSet().getIssuer());
    } catch (ParseException | RuntimeException e) {
      return Optional.empty();
    }
  }

  private static DefaultJWTProcessor<SecurityContext> processor(
      AuthProperties.TrustedIssuer settings, Clock clock, LongSupplier nanoTime) {
    DefaultJWTProcessor<SecurityContext> processor = new DefaultJWTProcessor<>();
    processor.setJWSTypeVerifier(
        new DefaultJOSEObjectTypeVerifier<>(
            JOSEObjectType.JWT, new JOSEObjectType("at+jwt"), null));
    processor.setJWSKeySelector(
        new JWSVerificationKeySelector<>(ALGORITHMS, source(settings, nanoTime)));
    DefaultJWTClaimsVerifier<SecurityContext> claims =
        new DefaultJWTClaimsVerifier<>(
            Set.of(settings.audience()),
            new JWTClaimsSet.Builder().issuer(settings.issuer()).build(),
            Set.of("exp", settings.identityClaim()),
            null) {
          @Override
          protected Date currentTime() {
            return Date.from(clock.instant());
          }
        };
    claims.setMaxClockSkew(CLOCK_SKEW_SECONDS);
    processor.setJWTClaimsSetVerifier(claims);
    return processor;
  }

  private static JWKSource<SecurityContext> source(
      AuthProperties.TrustedIssuer settings, LongSupplier nanoTime) {
    String property = "registry-cache.auth.trusted-issuers (issuer '" + settings.issuer() + "')";
    if (settings.jwksFile() != null) {
      WatchedFile<JWKSet> file =
          new WatchedFile<>(
              settings.jwksFile(),
              property + " jwks-file",
              ExternalTokens::parseJwks,
              nanoTime,
              () -> {});
      return (selector, context) -> selector.select(file.get());
    }
    int timeout = (int) settings.jwksTimeout().toMillis();
    try {
      return JWKSourceBuilder.<SecurityContext>create(
              settings.jwksUrl().toURL(),
              new DefaultResourceRetriever(timeout, timeout, JWKS_SIZE_LIMIT))
          .cache(settings.jwksCacheTtl().toMillis(), timeout)
          .rateLimited(JWKS_RATE_LIMIT_MILLIS)
          .refreshAheadCache(false)
          .retrying(false)
          .outageTolerant(false)
          .build();
    } catch (MalformedURLException | IllegalArgumentException e) {
      throw new IllegalStateException(property + " jwks-url cannot be used: " + e.getMessage(), e);
    }
  }

  /** A JWK set file: its public keys; private parts, if any, are dropped. */
  private static JWKSet parseJwks(String text) {
    JWKSet set;
    try {
      set = JWKSet.parse(text);
    } catch (ParseException e) {
      throw new IllegalArgumentException("not a JWK set (RFC 7517 section 5): " + e.getMessage());
    }
    if (set.getKeys().isEmpty()) {
      throw new IllegalArgumentException("the JWK set holds no key");
    }
    return set.toPublicJWKSet();
  }
}
