package io.registrycache.management;

import java.net.InetSocketAddress;
import org.springframework.security.authorization.AuthorizationDecision;
import org.springframework.security.authorization.AuthorizationResult;
import org.springframework.security.authorization.ReactiveAuthorizationManager;
import org.springframework.security.core.Authentication;
import org.springframework.security.web.server.authorization.AuthorizationContext;
import reactor.core.publisher.Mono;

/**
 * The rule of a management port without a token: a client on a loopback address (127.0.0.0/8,
 * {@code ::1}; a local {@code ./mvnw spring-boot:run}, a sidecar) is let in, anyone else is not.
 * The address is the request's remote address: the TCP peer's, or the forwarded one when {@code
 * server.forward-headers-strategy} makes the framework read {@code Forwarded} / {@code
 * X-Forwarded-For}. An address that is only a name (never resolved) is not loopback.
 */
final class LoopbackClients implements ReactiveAuthorizationManager<AuthorizationContext> {

  @Override
  public Mono<AuthorizationResult> authorize(
      Mono<Authentication> authentication, AuthorizationContext context) {
    return Mono.just(
        new AuthorizationDecision(
            isLoopback(context.getExchange().getRequest().getRemoteAddress())));
  }

  /** Whether {@code remote} is a resolved loopback address; {@code null} is not. */
  static boolean isLoopback(InetSocketAddress remote) {
    return remote != null && remote.getAddress() != null && remote.getAddress().isLoopbackAddress();
  }
}
