package io.registrycache.config;

import java.net.URI;
import java.nio.file.Path;
import java.time.Duration;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Set;
import org.springframework.boot.context.properties.ConfigurationProperties;
import org.springframework.boot.context.properties.bind.DefaultValue;

/**
 * {@code registry-cache.auth.*}: who may pull from the pull port (docs/security.md, "Who may
 * pull"). Off by default: the pull port is then anonymous, as before. When on, every {@code /v2}
 * request may carry HTTP Basic credentials (RFC 7617) of a user of {@code htpasswd-file} or a robot
 * of {@code tokens-file}, or a bearer token of the cache's own token server ({@code token}) or of a
 * trusted external issuer ({@code trusted-issuers}); what each identity may pull is said by {@code
 * rules}, and nothing is allowed that no rule allows.
 *
 * @param enabled whether the pull port authenticates and authorises at all; default false
 * @param htpasswdFile an Apache htpasswd file of users, {@code name:<bcrypt hash>} per line ({@code
 *     htpasswd -B}; {@code $2a$}, {@code $2b$}, {@code $2y$}); any other hash scheme is a start-up
 *     error. Read again when its modification time or size changes (checked at most once a second);
 *     a broken new version is logged and the previous one kept. Unset by default
 * @param tokensFile robot (service) accounts, {@code name:token} per line, {@code #} comments;
 *     tokens at least 32 characters; they log in with Basic as {@code name} / {@code token};
 *     reloaded like {@code htpasswd-file}; unset by default; never logged
 * @param realm the {@code realm} of the {@code WWW-Authenticate} challenge; default {@code
 *     registry-cache}
 * @param groups named groups of identities, each named with its kind: {@code
 *     groups.<group>=user:alice,robot:ci,jwt:idp/bob} (an htpasswd user, a robot, subject {@code
 *     bob} of the trusted issuer keyed {@code idp}); a group admits exactly the identities it
 *     lists. Default none
 * @param rules what may be pulled by whom: each rule allows its {@code subjects} to pull the {@code
 *     repositories} of its {@code upstreams}; default none (with auth on, nothing may be pulled)
 * @param token the cache as its own token server (Docker's token flow); off by default
 * @param trustedIssuers external token issuers whose bearer JWTs the pull port accepts, as the
 *     distribution project's {@code auth.token} does for its token server; default none
 * @param legacyIdentityNames the meaning names had before identities carried their kind, kept for
 *     one release (a warning is logged at start): {@code user:<name>} also names the subject {@code
 *     <name>} of every trusted issuer, a bare name in a group names a user, robot or issuer subject
 *     of that name, and {@code group:<group>} also takes an issuer's groups claim naming {@code
 *     <group>}; default false (docs/security.md, "Identities and their kinds")
 */
@ConfigurationProperties("registry-cache.auth")
public record AuthProperties(
    @DefaultValue("false") boolean enabled,
    Path htpasswdFile,
    Path tokensFile,
    @DefaultValue("registry-cache") String realm,
    Map<String, List<String>> groups,
    @DefaultValue List<Rule> rules,
    @DefaultValue Token token,
    @DefaultValue List<TrustedIssuer> trustedIssuers,
    @DefaultValue("false") boolean legacyIdentityNames) {

  /**
   * A group member or rule subject naming one identity: {@code user:<name>}, {@code robot:<name>},
   * {@code jwt:<issuer-key>/<subject>}.
   */
  public static boolean namesOneIdentity(String subject) {
    if (subject.startsWith("user:") || subject.startsWith("robot:")) {
      return !subject.endsWith(":");
    }
    if (subject.startsWith("jwt:")) {
      int slash = subject.indexOf('/');
      return slash > "jwt:".length() && slash < subject.length() - 1;
    }
    return false;
  }

  public AuthProperties {
    trustedIssuers = List.copyOf(trustedIssuers);
    Set<String> keys = new HashSet<>();
    for (TrustedIssuer trusted : trustedIssuers) {
      if (!keys.add(trusted.key())) {
        throw new IllegalArgumentException(
            "registry-cache.auth.trusted-issuers: two issuers have the key '"
                + trusted.key()
                + "': set a distinct key for each (it names their subjects, jwt:<key>/<subject>)");
      }
    }
    if (token.enabled()) {
      for (TrustedIssuer trusted : trustedIssuers) {
        if (trusted.issuer().equals(token.service())) {
          throw new IllegalArgumentException(
              "registry-cache.auth.trusted-issuers: issuer '"
                  + trusted.issuer()
                  + "' is the cache's own token service (registry-cache.auth.token.service)");
        }
      }
    }
    groups = groups == null ? Map.of() : Map.copyOf(new LinkedHashMap<>(groups));
    for (Map.Entry<String, List<String>> group : groups.entrySet()) {
      if (group.getKey().startsWith("jwt:")) {
        throw new IllegalArgumentException(
            "registry-cache.auth.groups."
                + group.getKey()
                + ": a group name may not start with jwt: (group:jwt:<issuer-key>/<group> names an issuer's group)");
      }
      for (String member : group.getValue()) {
        if (!namesOneIdentity(member.strip()) && !legacyIdentityNames) {
          throw new IllegalArgumentException(
              "registry-cache.auth.groups."
                  + group.getKey()
                  + ": member '"
                  + member
                  + "' must name its kind: user:"
                  + member
                  + ", robot:"
                  + member
                  + " or jwt:<issuer-key>/"
                  + member
                  + " (registry-cache.auth.legacy-identity-names=true keeps the old meaning for one release)");
        }
      }
    }
    rules = List.copyOf(rules);
    if (realm == null
        || realm.isBlank()
        || realm.contains("\"")
        || realm.contains("\\")
        || realm.chars().anyMatch(c -> c < 0x20 || c == 0x7f)) {
      throw new IllegalArgumentException(
          "registry-cache.auth.realm must be non-empty printable text without quotes or backslashes");
    }
  }

  /**
   * One access rule.
   *
   * @param subjects whom the rule is for: {@code user:<name>} (htpasswd), {@code robot:<name>}
   *     (tokens file), {@code jwt:<issuer-key>/<subject>} (a trusted issuer's subject), {@code
   *     group:<group>} (the members of {@code registry-cache.auth.groups.<group>}), {@code
   *     group:jwt:<issuer-key>/<group>} (subjects whose token's groups claim lists {@code
   *     <group>}), {@code authenticated} (any user, robot or issuer subject), {@code anonymous}
   *     (requests without credentials), or {@code *} (everyone, anonymous and pass-through
   *     included); at least one
   * @param upstreams upstream keys ({@code registry-cache.upstreams.<key>}; with {@code
   *     allow-any-upstream} an unconfigured upstream's key is its host) or {@code *}; default
   *     {@code *}
   * @param repositories repository patterns ({@link RepositoryGlob}: {@code *} within a component,
   *     {@code **} across), matched against the canonical name at the upstream (Docker Hub's {@code
   *     library/} applied); at least one
   */
  public record Rule(
      @DefaultValue List<String> subjects,
      @DefaultValue("*") List<String> upstreams,
      @DefaultValue List<RepositoryGlob> repositories) {

    public Rule {
      subjects = subjects.stream().map(String::strip).toList();
      upstreams = List.copyOf(upstreams);
      repositories = List.copyOf(repositories);
      if (subjects.isEmpty()) {
        throw new IllegalArgumentException(
            "an access rule (registry-cache.auth.rules) needs at least one subject");
      }
      for (String subject : subjects) {
        if (!(subject.equals("anonymous")
            || subject.equals("authenticated")
            || subject.equals("*")
            || namesOneIdentity(subject)
            || (subject.startsWith("group:") && subject.length() > "group:".length()))) {
          throw new IllegalArgumentException(
              "access rule subject '"
                  + subject
                  + "' must be user:<name>, robot:<name>,"
                  + " jwt:<issuer-key>/<subject>, group:<group>, authenticated, anonymous or *");
        }
      }
      if (repositories.isEmpty()) {
        throw new IllegalArgumentException(
            "an access rule (registry-cache.auth.rules) needs at least one repository pattern");
      }
    }
  }

  /**
   * The cache as its own token server ("Docker Registry v2 authentication via central service" /
   * "Token Authentication Specification" of the distribution project; OAuth2 password grant, RFC
   * 6749 section 4.3): with it on, the pull port's challenge is {@code Bearer
   * realm="<realm>",service="<service>"}, {@code GET|POST /v2/token} issues JWTs (RFC 7519) signed
   * with {@code key-file}, each carrying the repositories granted for {@code pull}. Basic
   * credentials stay accepted on every request.
   *
   * @param enabled whether the token flow is on (needs {@code registry-cache.auth.enabled});
   *     default false
   * @param keyFile the private key the tokens are signed with: a PKCS#8 PEM RSA key of 2048 bits or
   *     more ({@code BEGIN PRIVATE KEY}; RS256), or a private JWK (RFC 7517 JSON; EC P-256 for
   *     ES256, or RSA); unset: an EC P-256 key made at start-up (logged as a warning: tokens then
   *     die with the process and replicas do not accept each other's)
   * @param ttl how long an issued token is valid; default 5 minutes
   * @param service the {@code service} of the challenge, the tokens' issuer and audience; default
   *     {@code registry-cache}
   * @param realm the token endpoint's absolute URL as clients reach it, e.g. {@code
   *     https://cache.example.com/v2/token}; unset: scheme and host of each request plus {@code
   *     /v2/token}
   */
  public record Token(
      @DefaultValue("false") boolean enabled,
      Path keyFile,
      @DefaultValue("5m") Duration ttl,
      @DefaultValue("registry-cache") String service,
      String realm) {

    public Token {
      if (service == null
          || service.isBlank()
          || service.contains("\"")
          || service.contains("\\")) {
        throw new IllegalArgumentException(
            "registry-cache.auth.token.service must be non-empty, without quotes");
      }
      if (realm != null
          && (realm.contains("\"")
              || !(realm.startsWith("http://") || realm.startsWith("https://")))) {
        throw new IllegalArgumentException(
            "registry-cache.auth.token.realm must be an http(s) URL without quotes");
      }
      if (ttl.isNegative() || ttl.isZero()) {
        throw new IllegalArgumentException("registry-cache.auth.token.ttl must be positive");
      }
    }
  }

  /**
   * An external token issuer the operator trusts: a bearer JWT (RFC 7519) on a {@code /v2} request
   * that is not the cache's own is accepted when its {@code iss} is {@code issuer}, its {@code aud}
   * names {@code audience}, it is signed (RS256 or ES256) by a key of the issuer's JWK set (RFC
   * 7517) with the {@code kid} of its header, and it is within {@code exp} and {@code nbf} (60 s of
   * clock skew). Its {@code identity-claim} names a subject ({@code jwt:<key>/<subject>} in rules
   * and groups) and its {@code groups-claim} the groups it is in ({@code group:jwt:<key>/<group>}
   * in the rules).
   *
   * @param issuer the exact {@code iss} the tokens carry, e.g. {@code https://idp.example.com};
   *     required
   * @param audience the {@code aud} the tokens must name, e.g. {@code registry-cache}; required
   * @param jwksFile a JWK set file (JSON, public keys) of the issuer; read again when it changes
   *     (looked at once a second at most); exactly one of {@code jwks-file} and {@code jwks-url}
   * @param jwksUrl the issuer's JWK set URL, {@code https} (or {@code http} to a loopback host):
   *     fetched at the first token, kept {@code jwks-cache-ttl}, fetched again for a {@code kid} it
   *     does not have (twice per 30 s at most)
   * @param jwksTimeout connect and read time-out of each {@code jwks-url} fetch; default 5 s
   * @param jwksCacheTtl how long a fetched JWK set is used before it is fetched again; default 5
   *     minutes
   * @param identityClaim the claim naming the user, a string; default {@code sub}
   * @param groupsClaim the claim listing the user's groups (an array of strings, or one string);
   *     default {@code groups}; a token without it is in no group of its own
   * @param key the issuer's short name in rules and groups ({@code jwt:<key>/<subject>}):
   *     lower-case letters, digits, {@code .}, {@code -}, {@code _}; default the host of {@code
   *     issuer} when it is a URL, else {@code issuer} itself when that fits; distinct per issuer
   */
  public record TrustedIssuer(
      String key,
      String issuer,
      String audience,
      Path jwksFile,
      URI jwksUrl,
      @DefaultValue("5s") Duration jwksTimeout,
      @DefaultValue("5m") Duration jwksCacheTtl,
      @DefaultValue("sub") String identityClaim,
      @DefaultValue("groups") String groupsClaim) {

    public TrustedIssuer {
      String name = "registry-cache.auth.trusted-issuers";
      if (issuer == null || issuer.isBlank()) {
        throw new IllegalArgumentException(
            name + "[].issuer is required: the exact iss of the tokens");
      }
      String where = name + " (issuer '" + issuer + "')";
      if (audience == null || audience.isBlank()) {
        throw new IllegalArgumentException(
            where + ": audience is required: the aud the tokens must name");
      }
      if ((jwksFile == null) == (jwksUrl == null)) {
        throw new IllegalArgumentException(
            where + ": exactly one of jwks-file and jwks-url is needed");
      }
      if (jwksUrl != null) {
        String scheme =
            jwksUrl.getScheme() == null ? "" : jwksUrl.getScheme().toLowerCase(Locale.ROOT);
        if (jwksUrl.getHost() == null
            || !(scheme.equals("https")
                || (scheme.equals("http") && loopback(jwksUrl.getHost())))) {
          throw new IllegalArgumentException(
              where
                  + ": jwks-url must be an https URL (http only to a loopback host), not "
                  + jwksUrl);
        }
        if (jwksUrl.getUserInfo() != null) {
          throw new IllegalArgumentException(where + ": jwks-url must not carry user information");
        }
      }
      if (jwksTimeout.isNegative()
          || jwksTimeout.isZero()
          || jwksTimeout.toMillis() > Integer.MAX_VALUE) {
        throw new IllegalArgumentException(where + ": jwks-timeout must be positive");
      }
      if (jwksCacheTtl.compareTo(Duration.ofSeconds(30)) < 0) {
        throw new IllegalArgumentException(where + ": jwks-cache-ttl must be at least 30s");
      }
      if (identityClaim == null || identityClaim.isBlank()) {
        throw new IllegalArgumentException(where + ": identity-claim must not be empty");
      }
      if (groupsClaim != null && groupsClaim.isBlank()) {
        groupsClaim = null;
      }
      if (key == null || key.isBlank()) {
        String host = null;
        try {
          host = URI.create(issuer).getHost();
        } catch (IllegalArgumentException e) {
          // not a URI: the issuer itself, if it fits
        }
        key = (host != null ? host : issuer).toLowerCase(Locale.ROOT);
      }
      if (!key.matches("[a-z0-9][a-z0-9._-]{0,62}")) {
        throw new IllegalArgumentException(
            where
                + ": key '"
                + key
                + "' must be lower-case letters, digits, '.', '-' or '_'"
                + " (it names the issuer's subjects in rules: jwt:<key>/<subject>); set registry-cache.auth.trusted-issuers[].key");
      }
    }

    /** Whether {@code host} (of a URI) is a loopback name or address, judged without DNS. */
    static boolean loopback(String host) {
      String h = host.toLowerCase(Locale.ROOT);
      return h.equals("localhost")
          || h.equals("[::1]")
          || h.matches("127\\.\\d{1,3}\\.\\d{1,3}\\.\\d{1,3}");
    }
  }
}
