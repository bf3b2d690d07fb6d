package io.registrycache.management;

import io.registrycache.config.AdminProperties;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.util.List;
import java.util.Optional;
import java.util.regex.Pattern;
import org.springframework.security.authentication.ReactiveAuthenticationManager;
import org.springframework.security.authentication.UsernamePasswordAuthenticationToken;
import org.springframework.security.core.Authentication;
import org.springframework.security.core.authority.SimpleGrantedAuthority;
import org.springframework.security.oauth2.server.resource.InvalidBearerTokenException;
import org.springframework.security.oauth2.server.resource.authentication.BearerTokenAuthenticationToken;
import reactor.core.publisher.Mono;

/**
 * Accepts exactly the management token ({@code registry-cache.admin.token}, or the content of
 * {@code registry-cache.admin.token-file}) as a bearer token (RFC 6750). The presented token and
 * the configured one are compared as SHA-256 digests with {@link MessageDigest#isEqual}, so the
 * time taken says nothing about how much of the token was right. The token is never logged.
 */
final class ManagementToken implements ReactiveAuthenticationManager {

  /** RFC 6750 §2.1 {@code b64token}: what {@code Authorization: Bearer} can carry. */
  private static final Pattern B64TOKEN = Pattern.compile("[A-Za-z0-9\\-._~+/]+=*");

  /** The one authority a request with the token holds. */
  static final SimpleGrantedAuthority AUTHORITY = new SimpleGrantedAuthority("MANAGEMENT");

  private final byte[] tokenHash;

  private ManagementToken(String token) {
    this.tokenHash = sha256(token);
  }

  /**
   * The configured token, or empty when none is set (then only loopback clients are let in).
   *
   * @throws UncheckedIOException when {@code token-file} cannot be read
   * @throws IllegalStateException when {@code token-file} is empty, or the token is not an RFC 6750
   *     {@code b64token} (letters, digits, {@code -._~+/}, then {@code =} padding), which no client
   *     could send
   */
  static Optional<ManagementToken> of(AdminProperties admin) {
    String token = admin.token() == null ? "" : admin.token().strip();
    String source = "registry-cache.admin.token";
    if (admin.tokenFile() != null) {
      source = "registry-cache.admin.token-file " + admin.tokenFile();
      try {
        token = Files.readString(admin.tokenFile(), StandardCharsets.UTF_8).strip();
      } catch (IOException e) {
        throw new UncheckedIOException("cannot read " + source, e);
      }
      if (token.isEmpty()) {
        throw new IllegalStateException(source + " is empty");
      }
    }
    if (token.isEmpty()) {
      return Optional.empty();
    }
    if (!B64TOKEN.matcher(token).matches()) {
      throw new IllegalStateException(
          source
              + " holds a character that 'Authorization: Bearer' cannot carry (RFC 6750 "
              + "b64token: letters, digits and -._~+/ then = padding), e.g. from 'openssl rand -base64 32'");
    }
    return Optional.of(new ManagementToken(token));
  }

  @Override
  public Mono<Authentication> authenticate(Authentication authentication) {
    return Mono.fromSupplier(
        () -> {
          if (authentication instanceof BearerTokenAuthenticationToken bearer
              && MessageDigest.isEqual(tokenHash, sha256(bearer.getToken()))) {
            return UsernamePasswordAuthenticationToken.authenticated(
                "management", null, List.of(AUTHORITY));
          }
          throw new InvalidBearerTokenException("not the management token");
        });
  }

  private static byte[] sha256(String value) {
    try {
      return MessageDigest.getInstance("SHA-256").digest(value.getBytes(StandardCharsets.UTF_8));
    } catch (NoSuchAlgorithmException e) {
      throw new IllegalStateException(e);
    }
  }
}
