package io.registrycache.auth;

import com.github.benmanes.caffeine.cache.Cache;
import com.github.benmanes.caffeine.cache.Caffeine;
import io.github.bucket4j.TimeMeter;
import io.registrycache.config.AuthProperties;
import io.registrycache.config.RegistryCacheProperties;
import io.registrycache.oci.OciException;
import java.net.URI;
import java.nio.charset.StandardCharsets;
import java.security.GeneralSecurityException;
import java.security.SecureRandom;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HexFormat;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Set;
import java.util.TreeMap;
import java.util.concurrent.ConcurrentHashMap;
import java.util.function.Supplier;
import javax.crypto.Mac;
import javax.crypto.spec.SecretKeySpec;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import org.springframework.beans.factory.annotation.Autowired;
import org.springframework.security.crypto.bcrypt.BCrypt;
import org.springframework.security.crypto.bcrypt.BCryptPasswordEncoder;
import org.springframework.security.crypto.password.PasswordEncoder;
import org.springframework.stereotype.Component;
import reactor.core.publisher.Mono;
import reactor.core.scheduler.Schedulers;

/**
 * Who a pull request is from, when {@code registry-cache.auth.enabled} is on. The request's {@code
 * Authorization} header is read by {@link Credentials#parse}; then:
 *
 * <ul>
 *   <li>HTTP Basic (RFC 7617): the users of {@code htpasswd-file} (bcrypt, Spring Security's {@link
 *       BCryptPasswordEncoder}) and the robots of {@code tokens-file} (SHA-256, constant-time). A
 *       name in both files is a user. Basic is accepted on every request, as containerd sends a
 *       mirror only a fixed header. When some upstream takes each client's own credentials ({@code
 *       credentials: passthrough}), Basic credentials neither file knows become a {@link
 *       Identity.Kind#PASSTHROUGH} identity, which may pull from such upstreams only ({@link
 *       PullAccess}), once the upstream confirms.
 *   <li>Bearer (RFC 6750): tokens of the cache's token endpoint ({@link TokenService}) and of the
 *       external issuers in {@code registry-cache.auth.trusted-issuers} ({@link ExternalTokens}),
 *       both verified by nimbus-jose-jwt's {@code DefaultJWTProcessor}, their verdicts kept in one
 *       cache ({@link TokenVerdicts}).
 * </ul>
 *
 * <p><b>Equal work for every failed check.</b> Each Basic check that is not remembered runs exactly
 * one bcrypt: a user's against their hash; everything else (a robot, an unknown name) the same
 * path, a SHA-256 compare of the robot tokens and then, unless a robot's token matched, one bcrypt
 * against a dummy hash at the highest cost of the htpasswd file. A password over bcrypt's 72 bytes
 * (bcrypt ignores the bytes after the 72nd) never matches, costs the same one bcrypt, and is logged
 * once per user and file version, naming the user. An empty password is refused without a bcrypt
 * ({@code BCryptPasswordEncoder} does not check it), whatever the name.
 *
 * <p>bcrypt is slow by design (tens of milliseconds a check), so it runs on Reactor's
 * bounded-elastic threads, never on an event loop, and a successful check is remembered for {@link
 * #REMEMBER} under an HMAC, with a key made at start-up, of the whole {@code Authorization} value
 * (so a client's later requests with the same header are known without parsing it) or, for the
 * token endpoint, of user and password (the password itself is never kept); both files changing
 * forgets everything remembered. Failed checks are not remembered: with {@code
 * registry-cache.rate-limit.enabled}, each client address may fail at most {@code
 * rate-limit.failed-checks.per-minute} checks a minute ({@link FailedChecks}), then gets 429 {@code
 * TOOMANYREQUESTS} without a check (docs/security.md).
 */
@Component
public class PullAuthentication {

  /** How long a successful credential check is remembered. */
  static final Duration REMEMBER = Duration.ofMinutes(5);

  /** The most bytes of a password bcrypt reads; longer passwords are refused. */
  public static final int MAX_PASSWORD_BYTES = 72;

  private static final Logger log = LoggerFactory.getLogger(PullAuthentication.class);

  /**
   * Checked instead of a password over {@link #MAX_PASSWORD_BYTES}, so that refusing it costs a
   * bcrypt too.
   */
  private static final String STAND_IN = "registry-cache: a password over 72 bytes";

  /** The htpasswd file's users, and the dummy hash at its highest cost. */
  private record Users(Htpasswd file, String dummyHash, Set<String> warnedLong) {}

  private final boolean enabled;

  /**
   * Whether some upstream takes each client's own credentials ({@code credentials: passthrough}).
   */
  private final boolean passthrough;

  private final TokenService tokens;

  /** Bearer tokens of the external issuers the operator trusts ({@code auth.trusted-issuers}). */
  private final ExternalTokens external;

  private final TokenVerdicts verdicts;

  /** The Basic challenge. */
  private final String challenge;

  private final WatchedFile<Users> users;
  private final WatchedFile<RobotTokens> robots;
  private final PasswordEncoder encoder;
  private final Cache<String, Identity> verified =
      Caffeine.newBuilder().expireAfterWrite(REMEMBER).maximumSize(10_000).build();
  private final ThreadLocal<Mac> rememberMac;

  /** The dummy hash when there is no htpasswd file (robots only). */
  private final String defaultDummyHash;

  /** The limit on failed checks per client address, or {@code null}. */
  private final FailedChecks failedChecks;

  public PullAuthentication(RegistryCacheProperties properties) {
    this(properties, new TokenService(properties));
  }

  @Autowired
  public PullAuthentication(RegistryCacheProperties properties, TokenService tokens) {
    this(properties, tokens, TimeMeter.SYSTEM_NANOTIME, new BCryptPasswordEncoder());
  }

  /**
   * @param clock the time of the failed-check limit, in nanoseconds from any origin
   */
  PullAuthentication(RegistryCacheProperties properties, TokenService tokens, TimeMeter clock) {
    this(properties, tokens, clock, new BCryptPasswordEncoder());
  }

  /**
   * @param encoder checks passwords against the htpasswd file's bcrypt hashes (tests count its
   *     calls)
   */
  PullAuthentication(
      RegistryCacheProperties properties,
      TokenService tokens,
      TimeMeter clock,
      PasswordEncoder encoder) {
    this.tokens = tokens;
    this.verdicts = tokens.verdicts();
    this.external = new ExternalTokens(properties, verdicts);
    this.encoder = encoder;
    AuthProperties auth = properties.auth();
    this.enabled = auth.enabled();
    this.passthrough =
        properties.upstreams().upstreams().values().stream().anyMatch(u -> u.passthrough());
    this.challenge = Challenges.basic(auth.realm());
    byte[] key = new byte[32];
    new SecureRandom().nextBytes(key);
    this.rememberMac = keyedMacs(new SecretKeySpec(key, "HmacSHA256"));
    this.defaultDummyHash = dummyHash(Htpasswd.DEFAULT_COST);
    if (!enabled) {
      this.failedChecks = null;
      this.users = null;
      this.robots = null;
      return;
    }
    this.failedChecks = FailedChecks.of(properties.rateLimit(), clock).orElse(null);
    this.users =
        auth.htpasswdFile() == null
            ? null
            : new WatchedFile<>(
                auth.htpasswdFile(),
                "registry-cache.auth.htpasswd-file",
                text -> users(Htpasswd.parse(text)),
                System::nanoTime,
                verified::invalidateAll);
    this.robots =
        auth.tokensFile() == null
            ? null
            : new WatchedFile<>(
                auth.tokensFile(),
                "registry-cache.auth.tokens-file",
                RobotTokens::parse,
                System::nanoTime,
                verified::invalidateAll);
    log.info(
        "Pull port authentication on: {} users, {} robots, {} trusted token issuers, {} access rules",
        users == null ? 0 : users.get().file().hashes().size(),
        robots == null ? 0 : robots.get().hashes().size(),
        auth.trustedIssuers().size(),
        auth.rules().size());
    if (users == null && robots == null && !external.enabled()) {
      log.warn(
          "registry-cache.auth.enabled is on without htpasswd-file, tokens-file or trusted-issuers: "
              + "only rules for anonymous apply");
    }
  }

  /**
   * A version of the htpasswd file, with the dummy hash at its highest cost; users of lower costs
   * are logged.
   */
  private static Users users(Htpasswd file) {
    int highest = file.highestCost();
    Map<Integer, List<String>> lower = new TreeMap<>();
    file.hashes()
        .forEach(
            (name, hash) -> {
              if (Htpasswd.cost(hash) < highest) {
                lower.computeIfAbsent(Htpasswd.cost(hash), c -> new ArrayList<>()).add(name);
              }
            });
    if (!lower.isEmpty()) {
      log.warn(
          "registry-cache.auth.htpasswd-file: users of a bcrypt cost below the file's highest ({}) answer a wrong"
              + " password faster than an unknown name does, so they can be told apart: {}; hash them again at cost {}",
          highest,
          lower,
          highest);
    }
    return new Users(file, dummyHash(highest), ConcurrentHashMap.newKeySet());
  }

  /**
   * A well-formed bcrypt hash at {@code cost} that no password matches: checking a password against
   * it costs what checking a real one of that cost does, without making one at start-up.
   */
  private static String dummyHash(int cost) {
    return BCrypt.gensalt("$2a", cost, new SecureRandom()) + ".".repeat(31);
  }

  /** Whether the pull port authenticates at all ({@code registry-cache.auth.enabled}). */
  public boolean enabled() {
    return enabled;
  }

  /**
   * The {@code WWW-Authenticate} value of a 401: {@code Basic realm="<realm>", charset="UTF-8"}.
   */
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
   *     challenge) for an unreadable header ({@link Credentials#parse}), a bearer token, or wrong
   *     credentials: the message never says whether the name or the password was wrong
   */
  public Mono<Identity> authenticate(List<String> authorization) {
    return authenticate(authorization, null, null);
  }

  /**
   * As {@link #authenticate(List)}, and also {@code Authorization: Bearer <token>} of {@link
   * TokenService} (with the token flow on) or of a trusted issuer ({@link ExternalTokens}): the
   * identity then carries the repositories the cache's token grants, or is the issuer's subject.
   * Challenges are {@code Bearer} with the token flow on ({@link #challenge(URI, String)}).
   *
   * @param requestUri the request's URI, for the realm of a {@code Bearer} challenge; {@code null}
   *     for a Basic challenge (and no bearer token accepted)
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
   * sends the same header with every request). A bearer token verified lately is known from {@link
   * TokenVerdicts} without parsing it again.
   */
  public Mono<Identity> authenticateRequest(
      List<String> authorization, Supplier<URI> requestUri, String client) {
    if (authorization == null || authorization.isEmpty()) {
      return Mono.just(Identity.ANONYMOUS);
    }
    Supplier<String> challenge = () -> challenge(requestUri, null);
    if (authorization.size() == 1
        && authorization.get(0).length() <= Credentials.MAX_HEADER_LENGTH
        && !authorization.get(0).regionMatches(true, 0, "Bearer", 0, 6)) {
      lookAtFiles();
      Identity known = verified.getIfPresent(rememberedHeader(authorization.get(0)));
      if (known != null) {
        return Mono.just(
            known); // this very header passed a check lately: no parsing, no HMAC of its parts
      }
    }
    Credentials credentials;
    try {
      credentials = Credentials.parse(authorization);
    } catch (Credentials.Invalid e) {
      return Mono.error(new AuthenticationRequired(challenge.get(), e.getMessage()));
    }
    if (credentials instanceof BasicCredentials basic) {
      return basic(basic, challenge, client, rememberedHeader(authorization.get(0)));
    }
    if (credentials instanceof Credentials.Bearer bearer) {
      return bearer(bearer.token(), requestUri != null, challenge);
    }
    return Mono.just(Identity.ANONYMOUS);
  }

  private Mono<Identity> bearer(String token, boolean accepted, Supplier<String> challenge) {
    if (!accepted || (!tokens.enabled() && !external.enabled())) {
      return Mono.error(
          new AuthenticationRequired(
              challenge.get(),
              "only Basic credentials are accepted here (Authorization: Basic <base64 of user:password>)"));
    }
    TokenVerdicts.Verdict known = verdicts.remembered(token);
    if (known != null && (tokens.enabled() || known.identity().kind() == Identity.Kind.ISSUER)) {
      return Mono.just(known.identity()); // no parse, no signature check, no thread hop
    }
    if (external.claimsTrustedIssuer(token)) {
      return Mono.fromCallable(() -> external.verify(token))
          .subscribeOn(Schedulers.boundedElastic()) // a jwks-url may be fetched
          .flatMap(
              found ->
                  found
                      .map(Mono::just)
                      .orElseGet(
                          () ->
                              Mono.error(
                                  new AuthenticationRequired(
                                      challenge.get(), "invalid or expired bearer token"))));
    }
    if (!tokens.enabled()) {
      return Mono.error(
          new AuthenticationRequired(
              challenge.get(), "bearer token of an issuer that is not trusted"));
    }
    return tokens
        .verify(token)
        .map(Mono::just)
        .orElseGet(
            () ->
                Mono.error(
                    new AuthenticationRequired(
                        challenge.get(), "invalid or expired bearer token")));
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
    if (user == null
        || user.isEmpty()
        || password == null
        || user.contains(":")
        || user.chars().anyMatch(c -> c < 0x20 || c == 0x7f)) {
      return Mono.error(new AuthenticationRequired(challenge, "invalid user name or password"));
    }
    BasicCredentials credentials = new BasicCredentials(user, password);
    return basic(credentials, () -> challenge, client, remembered(credentials));
  }

  /**
   * The {@code WWW-Authenticate} value for a 401 of the pull API ({@link Challenges}): with the
   * token flow on, {@code Bearer realm="<realm>",service="<service>"} and, for a repository, {@code
   * ,scope="repository:<name>:pull"} (distribution's token specification); else {@link
   * #challenge()}.
   *
   * @param requestUri the request's URI: its scheme and authority make the realm unless {@code
   *     registry-cache.auth.token.realm} is set
   * @param repository the repository the client asked for, as named in its path, or {@code null}
   */
  public String challenge(URI requestUri, String repository) {
    return challenge(requestUri == null ? null : () -> requestUri, repository);
  }

  /**
   * As {@link #challenge(URI, String)}, the URI made only when the realm needs it; {@code null}:
   * the Basic challenge.
   */
  public String challenge(Supplier<URI> requestUri, String repository) {
    if (!tokens.enabled() || requestUri == null) {
      return challenge;
    }
    String realm =
        tokens
            .realm()
            .orElseGet(
                () -> {
                  URI uri = requestUri.get();
                  return uri.getScheme() + "://" + uri.getRawAuthority() + "/v2/token";
                });
    return Challenges.bearer(
        realm, tokens.service(), repository == null ? null : Challenges.pullScope(repository));
  }

  /**
   * Checks Basic credentials, remembering a success under {@code rememberedAs} (an HMAC of the
   * header, or of user and password).
   */
  private Mono<Identity> basic(
      BasicCredentials credentials,
      Supplier<String> challenge,
      String client,
      String rememberedAs) {
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
        .flatMap(
            found ->
                found
                    .or(
                        () ->
                            passthrough
                                // Not the cache's credentials: a pass-through upstream may know
                                // them (it decides).
                                ? Optional.of(
                                    new Identity(Identity.Kind.PASSTHROUGH, credentials.user()))
                                : Optional.empty())
                    .map(
                        identity -> {
                          verified.put(rememberedAs, identity);
                          // Credentials the cache does not know failed its own check, though a
                          // pass-through upstream may take them: the token stays used, so guessing
                          // a user's password here is limited as before.
                          if (failedChecks != null
                              && identity.kind() != Identity.Kind.PASSTHROUGH) {
                            failedChecks.succeeded(client);
                          }
                          return Mono.just(identity);
                        })
                    .orElseGet(
                        () ->
                            Mono.error(
                                new AuthenticationRequired(
                                    challenge.get(), "invalid user name or password"))));
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
   * @throws AuthenticationRequired 401 with the Basic challenge for an unreadable header ({@link
   *     Credentials#parse}), or a bearer token this cache did not issue or that expired
   */
  public Optional<BasicCredentials> passthroughCredentials(List<String> authorization) {
    Credentials credentials;
    try {
      credentials = Credentials.parse(authorization);
    } catch (Credentials.Invalid e) {
      throw new AuthenticationRequired(challenge, e.getMessage());
    }
    if (credentials instanceof BasicCredentials basic) {
      return Optional.of(basic);
    }
    if (credentials instanceof Credentials.Bearer bearer) {
      if (!tokens.enabled()) {
        throw new AuthenticationRequired(
            challenge, "only Basic credentials are passed through to the upstream");
      }
      return tokens
          .passedCredentials(bearer.token())
          .orElseThrow(
              () -> new AuthenticationRequired(challenge, "invalid or expired bearer token"));
    }
    return Optional.empty();
  }

  /**
   * Whether some upstream takes each client's own credentials ({@code credentials: passthrough}).
   */
  public boolean passthrough() {
    return passthrough;
  }

  /**
   * The user or robot these credentials prove, if any. Blocking: exactly one bcrypt, unless a
   * robot's token matched (then none).
   */
  Optional<Identity> verify(BasicCredentials credentials) {
    Users known = users == null ? null : users.get();
    String dummy = known == null ? defaultDummyHash : known.dummyHash();
    String password = credentials.password();
    boolean tooLong = password.getBytes(StandardCharsets.UTF_8).length > MAX_PASSWORD_BYTES;
    String hash = known == null ? null : known.file().hashes().get(credentials.user());
    if (hash != null) {
      if (tooLong) {
        if (known.warnedLong().add(credentials.user())) {
          log.warn(
              "user '{}' gave a password of more than {} bytes: bcrypt reads only the first {}, so such passwords"
                  + " are refused; set one of at most {} bytes (docs/security.md)",
              credentials.user(),
              MAX_PASSWORD_BYTES,
              MAX_PASSWORD_BYTES,
              MAX_PASSWORD_BYTES);
        }
        encoder.matches(STAND_IN, hash); // the same work as a wrong password of this user
        return Optional.empty();
      }
      return encoder.matches(password, hash)
          ? Optional.of(new Identity(Identity.Kind.USER, credentials.user()))
          : Optional.empty();
    }
    // A robot or an unknown name: one path, so that neither can be told from the other.
    RobotTokens tokens = robots == null ? null : robots.get();
    boolean robot = tokens != null && tokens.verify(credentials.user(), password);
    if (robot) {
      return Optional.of(new Identity(Identity.Kind.ROBOT, credentials.user()));
    }
    encoder.matches(tooLong ? STAND_IN : password, dummy);
    return Optional.empty();
  }

  /**
   * One keyed HMAC per thread: a provider lookup and key set-up per request cost more than the
   * HMAC.
   */
  private static ThreadLocal<Mac> keyedMacs(SecretKeySpec key) {
    return ThreadLocal.withInitial(
        () -> {
          try {
            Mac mac = Mac.getInstance("HmacSHA256");
            mac.init(key);
            return mac;
          } catch (GeneralSecurityException e) {
            throw new IllegalStateException(e);
          }
        });
  }

  /**
   * The HMAC of a whole {@code Authorization} value; its first byte (1) is no user name's (no
   * control characters).
   */
  private String rememberedHeader(String header) {
    Mac mac = rememberMac.get();
    mac.update((byte) 1);
    return HexFormat.of().formatHex(mac.doFinal(header.getBytes(StandardCharsets.UTF_8)));
  }

  private String remembered(BasicCredentials credentials) {
    Mac mac = rememberMac.get(); // doFinal resets it for the next use
    mac.update(credentials.user().getBytes(StandardCharsets.UTF_8));
    mac.update((byte) 0);
    return HexFormat.of()
        .formatHex(mac.doFinal(credentials.password().getBytes(StandardCharsets.UTF_8)));
  }
}
