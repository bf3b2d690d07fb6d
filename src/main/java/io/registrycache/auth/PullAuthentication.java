package io.registrycache.auth;

import com.github.benmanes.caffeine.cache.Cache;
import com.github.benmanes.caffeine.cache.Caffeine;
import io.registrycache.config.AuthProperties;
import io.registrycache.config.RegistryCacheProperties;
import io.registrycache.oci.OciException;
import java.net.URI;
import java.nio.charset.StandardCharsets;
import java.security.GeneralSecurityException;
import java.security.SecureRandom;
import java.time.Duration;
import java.util.HexFormat;
import java.util.List;
import java.util.Optional;
import java.util.function.Supplier;
import javax.crypto.Mac;
import javax.crypto.spec.SecretKeySpec;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import org.springframework.security.crypto.bcrypt.BCryptPasswordEncoder;
import org.springframework.stereotype.Component;
import reactor.core.publisher.Mono;
import reactor.core.scheduler.Schedulers;

/**
 * Checks the credentials of a pull request when {@code registry-cache.auth.enabled} is on: HTTP
 * Basic (RFC 7617) against the users of {@code htpasswd-file} (bcrypt, Spring Security's {@link
 * BCryptPasswordEncoder}) and the robots of {@code tokens-file} (SHA-256, constant-time). A name
 * in both files is a user. Basic is accepted on every request, as containerd sends a mirror only a
 * fixed header. When some upstream takes each client's own credentials ({@code
 * registry-cache.upstreams.<key>.credentials: passthrough}), Basic credentials neither file knows
 * are not refused but become a {@link Identity.Kind#PASSTHROUGH} identity, which may pull from
 * such upstreams only ({@link PullAuthorization}), once the upstream confirms. Bearer JWTs of the
 * external issuers in {@code registry-cache.auth.trusted-issuers} are users too ({@link
 * ExternalTokens}).
 *
 * <p>bcrypt is slow by design (tens of milliseconds a check), so it runs on Reactor's
 * bounded-elastic threads, never on an event loop, and a successful check is remembered for {@link
 * #REMEMBER} under an HMAC, with a key made at start-up, of the whole {@code Authorization} value
 * (so a client's later requests with the same header are known without parsing it) or, for the
 * token endpoint, of user and password (the password itself is never kept); both files changing
 * forgets everything remembered. Failed checks are not remembered (each costs a bcrypt): with
 * {@code registry-cache.rate-limit.enabled}, each client address may fail at most {@code
 * rate-limit.failed-checks.per-minute} checks a minute ({@link FailedChecks}), then gets 429
 * {@code TOOMANYREQUESTS} without a check (docs/security.md).
 */
@Component
public class PullAuthentication {

  /** How long a successful credential check is remembered. */
  static final Duration REMEMBER = Duration.ofMinutes(5);

  private static final Logger log = LoggerFactory.getLogger(PullAuthentication.class);


  private final boolean enabled;
  /** Whether some upstream takes each client's own credentials ({@code credentials: passthrough}). */
  private final boolean passthrough;
  private final TokenService tokens;
  /** Bearer tokens of the external issuers the operator trusts ({@code auth.trusted-issuers}). */
  private final ExternalTokens external;
  /** The Basic challenge. */
  private final String challenge;
  private final WatchedFile<Htpasswd> users;
  private final WatchedFile<RobotTokens> robots;
  private final BCryptPasswordEncoder bcrypt = new BCryptPasswordEncoder();
  private final Cache<String, Identity> verified =
      Caffeine.newBuilder().expireAfterWrite(REMEMBER).maximumSize(10_000).build();
  private final SecretKeySpec rememberKey;
  private final ThreadLocal<Mac> rememberMac;
  /** Compared against for unknown names, so that they cost a bcrypt like known users. */
  private final String dummyHash;
  /** The limit on failed checks per client address, or {@code null}. */
  private final FailedChecks failedChecks;

  public PullAuthentication(RegistryCacheProperties properties) {
    this(properties, new TokenService(properties));
  }

  @org.springframework.beans.factory.annotation.Autowired
  public PullAuthentication(RegistryCacheProperties properties, TokenService tokens) {
    this(properties, tokens, io.github.bucket4j.TimeMeter.SYSTEM_NANOTIME);
  }

  /** @param clock the time of the failed-check limit, in nanoseconds from any origin */
  PullAuthentication(RegistryCacheProperties properties, TokenService tokens, io.github.bucket4j.TimeMeter clock) {
    this.tokens = tokens;
    this.external = new ExternalTokens(properties);
    AuthProperties auth = properties.auth();
    this.enabled = auth.enabled();
    this.passthrough = properties.upstreams().upstreams().values().stream().anyMatch(u -> u.passthrough());
    this.challenge = "Basic realm=\"" + auth.realm() + "\", charset=\"UTF-8\"";
    byte[] key = new byte[32];
    new SecureRandom().nextBytes(key);
    this.rememberKey = new SecretKeySpec(key, "HmacSHA256");
    this.rememberMac = keyedMacs(rememberKey);
    if (!enabled) {
      this.failedChecks = null;
      this.dummyHash = null;
      this.users = null;
      this.robots = null;
      return;
    }
    this.dummyHash = bcrypt.encode(HexFormat.of().formatHex(key));
    this.failedChecks = FailedChecks.of(properties.rateLimit(), clock).orElse(null);
    this.users = auth.htpasswdFile() == null ? null
        : new WatchedFile<>(auth.htpasswdFile(), "registry-cache.auth.htpasswd-file", Htpasswd::parse,
            System::nanoTime, verified::invalidateAll);
    this.robots = auth.tokensFile() == null ? null
        : new WatchedFile<>(auth.tokensFile(), "registry-cache.auth.tokens-file", RobotTokens::parse,
            System::nanoTime, verified::invalidateAll);
    log.info("Pull port authentication on: {} users, {} robots, {} trusted token issuers, {} access rules",
        users == null ? 0 : users.get().hashes().size(), robots == null ? 0 : robots.get().hashes().size(),
        auth.trustedIssuers().size(), auth.rules().size());
    if (users == null && robots == null && !external.enabled()) {
      log.warn("registry-cache.auth.enabled is on without htpasswd-file, tokens-file or trusted-issuers: "
          + "only rules for anonymous apply");
    }
  }

  /** Whether the pull port authenticates at all ({@code registry-cache.auth.enabled}). */
  public boolean enabled() {
    return enabled;
  }

  /** The {@code WWW-Authenticate} value of a 401: {@code Basic realm="<realm>", charset="UTF-8"}. */
  public String challenge() {
    return challenge;
  }

  /**
   * The identity of a request from its {@code Authorization} headers.
   *
   * @param authorization the header's values (empty when it was not sent)
   * @return {@link Identity#ANONYMOUS} without a header or with empty Basic credentials ({@code
   *     Basic Og==}, base64 of {@code ":"}), else the user or robot the Basic credentials name
   * @throws AuthenticationRequired (as the Mono's error; 401 {@code UNAUTHORIZED} with the
   *     challenge) for more than one header, an unreadable one ({@link BasicCredentials#parse}),
   *     or wrong credentials: the message never says whether the name or the password was wrong
   */
  public Mono<Identity> authenticate(List<String> authorization) {
    return authenticate(authorization, null, null);
  }

  /**
   * As {@link #authenticate(List)}, and with the token flow on ({@code registry-cache.auth.token})
   * also {@code Authorization: Bearer <token>} of {@link TokenService} (RFC 6750): the identity
   * then carries the repositories the token grants; challenges are then {@code Bearer}
   * ({@link #challenge(URI, String)}). A bearer token whose {@code iss} is one of {@code
   * registry-cache.auth.trusted-issuers} is verified by {@link ExternalTokens} instead (on a
   * bounded-elastic thread, as its JWK set may be fetched), with or without the token flow: the
   * identity is then that issuer's user, limited by the rules only.
   *
   * @param requestUri the request's URI, for the realm of a {@code Bearer} challenge; {@code null}
   *     for a Basic challenge
   */
  public Mono<Identity> authenticate(List<String> authorization, URI requestUri) {
    return authenticate(authorization, requestUri, null);
  }

  /**
   * As {@link #authenticate(List, URI)}, counting a failed check against {@code client}'s limit
   * ({@code registry-cache.rate-limit.failed-checks}).
   *
   * @param client the client's IP address, text, or {@code null} when unknown
   * @throws OciException (as the Mono's error) 429 {@code TOOMANYREQUESTS} with {@code Retry-After}
   *     when {@code client} has failed too many checks lately: the credentials are then not checked
   */
  public Mono<Identity> authenticate(List<String> authorization, URI requestUri, String client) {
    return authenticateRequest(authorization, requestUri == null ? null : () -> requestUri, client);
  }

  /**
   * As {@link #authenticate(List, URI, String)}, the request's URI given as a supplier: it is made
   * only for a challenge or a bearer token, not for Basic credentials checked lately (a warm pull
   * sends the same header with every request).
   */
  public Mono<Identity> authenticateRequest(List<String> authorization, Supplier<URI> requestUri, String client) {
    Supplier<String> challenge = requestUri == null ? () -> this.challenge : () -> challenge(requestUri.get(), null);
    if (authorization == null || authorization.isEmpty()) {
      return Mono.just(Identity.ANONYMOUS);
    }
    if (authorization.size() > 1) {
      return Mono.error(new AuthenticationRequired(challenge.get(), "more than one Authorization header"));
    }
    String header = authorization.get(0);
    if (requestUri != null && (tokens.enabled() || external.enabled())
        && header.regionMatches(true, 0, "Bearer ", 0, 7)) {
      String token = header.substring(7).strip();
      if (external.claimsTrustedIssuer(token)) {
        return Mono.fromCallable(() -> external.verify(token))
            .subscribeOn(Schedulers.boundedElastic())
            .flatMap(found -> found.map(Mono::just).orElseGet(() -> Mono.error(
                new AuthenticationRequired(challenge.get(), "invalid or expired bearer token"))));
      }
      if (!tokens.enabled()) {
        return Mono.error(new AuthenticationRequired(challenge.get(), "bearer token of an issuer that is not trusted"));
      }
      return tokens.verify(token)
          .map(Mono::just)
          .orElseGet(() -> Mono.error(new AuthenticationRequired(challenge.get(), "invalid or expired bearer token")));
    }
    if (header.length() <= BasicCredentials.MAX_HEADER_LENGTH) {
      lookAtFiles();
      Identity known = verified.getIfPresent(rememberedHeader(header));
      if (known != null) {
        return Mono.just(known); // this very header passed a check lately: no parsing, no HMAC of its parts
      }
    }
    BasicCredentials credentials;
    try {
      credentials = BasicCredentials.parse(header);
    } catch (BasicCredentials.InvalidCredentials e) {
      return Mono.error(new AuthenticationRequired(challenge.get(), e.getMessage()));
    }
    return basic(credentials, challenge, client, rememberedHeader(header));
  }

  /**
   * The user or robot of a user name and password given otherwise than in a header (the token
   * endpoint's OAuth2 password grant, RFC 6749 section 4.3).
   *
   * @throws AuthenticationRequired (as the Mono's error) for wrong credentials
   */
  public Mono<Identity> authenticate(String user, String password) {
    return authenticate(user, password, null);
  }

  /**
   * As {@link #authenticate(String, String)}, counting a failed check against {@code client}'s
   * limit, as {@link #authenticate(List, URI, String)} does.
   */
  public Mono<Identity> authenticate(String user, String password, String client) {
    if (user == null || user.isEmpty() || password == null || user.contains(":")
        || user.chars().anyMatch(c -> c < 0x20 || c == 0x7f)) {
      return Mono.error(new AuthenticationRequired(challenge, "invalid user name or password"));
    }
    BasicCredentials credentials = new BasicCredentials(user, password);
    return basic(credentials, () -> challenge, client, remembered(credentials));
  }

  /**
   * The {@code WWW-Authenticate} value for a 401 of the pull API: with the token flow on,
   * {@code Bearer realm="<realm>",service="<service>"} and, for a repository, {@code
   * ,scope="repository:<name>:pull"} (distribution's token specification); else {@link
   * #challenge()}.
   *
   * @param requestUri the request's URI: its scheme and authority make the realm unless {@code
   *     registry-cache.auth.token.realm} is set
   * @param repository the repository the client asked for, as named in its path, or {@code null}
   */
  public String challenge(URI requestUri, String repository) {
    if (!tokens.enabled()) {
      return challenge;
    }
    String realm = tokens.realm().orElseGet(() -> requestUri.getScheme() + "://" + requestUri.getRawAuthority() + "/v2/token");
    return "Bearer realm=\"" + realm + "\",service=\"" + tokens.service() + "\""
        + (repository == null ? "" : ",scope=\"repository:" + repository + ":pull\"");
  }

  /**
   * Checks Basic credentials, remembering a success under {@code rememberedAs} (an HMAC of the
   * header, or of user and password).
   */
  private Mono<Identity> basic(
      BasicCredentials credentials, Supplier<String> challenge, String client, String rememberedAs) {
    if (credentials.user().isEmpty() && credentials.password().isEmpty()) {
      return Mono.just(Identity.ANONYMOUS); // "Basic Og==": what containers/image sends without credentials
    }
    lookAtFiles();
    Identity known = verified.getIfPresent(rememberedAs);
    if (known != null) {
      return Mono.just(known);
    }
    if (failedChecks != null) {
      try {
        failedChecks.take(client); // before the bcrypt: an address out of tokens costs none
      } catch (OciException e) {
        return Mono.error(e);
      }
    }
    return Mono.fromCallable(() -> verify(credentials))
        .subscribeOn(Schedulers.boundedElastic())
        .flatMap(found -> found
            .or(() -> passthrough
                // Not the cache's credentials: a pass-through upstream may know them (it decides).
                ? Optional.of(new Identity(Identity.Kind.PASSTHROUGH, credentials.user()))
                : Optional.empty())
            .map(identity -> {
              verified.put(rememberedAs, identity);
              // Credentials the cache does not know failed its own check, though a pass-through
              // upstream may take them: the token stays used, so guessing a user's password here
              // is limited as before.
              if (failedChecks != null && identity.kind() != Identity.Kind.PASSTHROUGH) {
                failedChecks.succeeded(client);
              }
              return Mono.just(identity);
            })
            .orElseGet(() -> Mono.error(new AuthenticationRequired(challenge.get(), "invalid user name or password"))));
  }

  /**
   * Looks at the files (at most once a second): a change forgets what was remembered, so a removed
   * user or robot is refused from the next check on, not after {@link #REMEMBER}.
   */
  private void lookAtFiles() {
    if (users != null) {
      users.get();
    }
    if (robots != null) {
      robots.get();
    }
  }

  /**
   * The credentials a request gives for a pass-through upstream ({@code
   * registry-cache.upstreams.<key>.credentials: passthrough}): its Basic credentials, or for a
   * bearer token of the cache's token endpoint the user name and password given there (held in
   * memory while the token is valid, {@link TokenService#passedCredentials}). Checks nothing
   * against the cache's users: the upstream judges them.
   *
   * @param authorization the request's {@code Authorization} values (empty when none was sent)
   * @return empty without credentials ({@code Basic Og==} included, or a token given without any)
   * @throws AuthenticationRequired 401 with the Basic challenge for more than one header, an
   *     unreadable one, or a bearer token this cache did not issue or that expired
   */
  public Optional<BasicCredentials> passthroughCredentials(List<String> authorization) {
    if (authorization == null || authorization.isEmpty()) {
      return Optional.empty();
    }
    if (authorization.size() > 1) {
      throw new AuthenticationRequired(challenge, "more than one Authorization header");
    }
    String header = authorization.get(0);
    if (header.regionMatches(true, 0, "Bearer ", 0, 7)) {
      if (!tokens.enabled()) {
        throw new AuthenticationRequired(challenge, "only Basic credentials are passed through to the upstream");
      }
      return tokens.passedCredentials(header.substring(7).strip())
          .orElseThrow(() -> new AuthenticationRequired(challenge, "invalid or expired bearer token"));
    }
    try {
      BasicCredentials credentials = BasicCredentials.parse(header);
      return credentials.user().isEmpty() && credentials.password().isEmpty()
          ? Optional.empty() : Optional.of(credentials);
    } catch (BasicCredentials.InvalidCredentials e) {
      throw new AuthenticationRequired(challenge, e.getMessage());
    }
  }

  /** Whether some upstream takes each client's own credentials ({@code credentials: passthrough}). */
  public boolean passthrough() {
    return passthrough;
  }

  /** The user or robot these credentials prove, if any. Blocking: bcrypt. */
  Optional<Identity> verify(BasicCredentials credentials) {
    Htpasswd htpasswd = users == null ? null : users.get();
    String hash = htpasswd == null ? null : htpasswd.hashes().get(credentials.user());
    if (hash != null) {
      return matches(credentials.password(), hash)
          ? Optional.of(new Identity(Identity.Kind.USER, credentials.user()))
          : Optional.empty();
    }
    RobotTokens tokens = robots == null ? null : robots.get();
    if (tokens != null && tokens.contains(credentials.user())) {
      return tokens.verify(credentials.user(), credentials.password())
          ? Optional.of(new Identity(Identity.Kind.ROBOT, credentials.user()))
          : Optional.empty();
    }
    matches(credentials.password(), dummyHash);
    return Optional.empty();
  }

  private boolean matches(String password, String hash) {
    try {
      return bcrypt.matches(password, hash);
    } catch (IllegalArgumentException e) {
      return false; // e.g. a password over bcrypt's 72 bytes: never equal
    }
  }

  /** One keyed HMAC per thread: a provider lookup and key set-up per request cost more than the HMAC. */
  private static ThreadLocal<Mac> keyedMacs(SecretKeySpec key) {
    return ThreadLocal.withInitial(() -> {
      try {
        Mac mac = Mac.getInstance("HmacSHA256");
        mac.init(key);
        return mac;
      } catch (GeneralSecurityException e) {
        throw new IllegalStateException(e);
      }
    });
  }

  /** The HMAC of a whole {@code Authorization} value; its first byte (1) is no user name's (no control characters). */
  private String rememberedHeader(String header) {
    Mac mac = rememberMac.get();
    mac.update((byte) 1);
    return HexFormat.of().formatHex(mac.doFinal(header.getBytes(StandardCharsets.UTF_8)));
  }

  private String remembered(BasicCredentials credentials) {
    Mac mac = rememberMac.get(); // doFinal resets it for the next use
    mac.update(credentials.user().getBytes(StandardCharsets.UTF_8));
    mac.update((byte) 0);
    return HexFormat.of().formatHex(mac.doFinal(credentials.password().getBytes(StandardCharsets.UTF_8)));
  }
}
