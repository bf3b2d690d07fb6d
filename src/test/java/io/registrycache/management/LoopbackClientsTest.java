package io.registrycache.management;

import static org.assertj.core.api.Assertions.assertThat;

import java.net.InetAddress;
import java.net.InetSocketAddress;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;
import org.junit.jupiter.params.provider.ValueSource;
import org.springframework.http.server.reactive.ServerHttpRequest;
import org.springframework.mock.http.server.reactive.MockServerHttpRequest;
import org.springframework.mock.web.server.MockServerWebExchange;
import org.springframework.security.authorization.AuthorizationResult;
import org.springframework.security.web.server.authorization.AuthorizationContext;
import org.springframework.web.server.ServerWebExchange;
import org.springframework.web.server.adapter.ForwardedHeaderTransformer;
import reactor.core.publisher.Mono;

/**
 * The rule of a management port without a token, decided on the request's remote address: the TCP
 * peer's, or, where {@code server.forward-headers-strategy=framework} puts Spring's {@link
 * ForwardedHeaderTransformer} in front, the forwarded client's.
 */
class LoopbackClientsTest {

  private static boolean granted(MockServerHttpRequest request) {
    return granted(MockServerWebExchange.from(request));
  }

  private static boolean granted(ServerWebExchange exchange) {
    AuthorizationResult result =
        new LoopbackClients().authorize(Mono.empty(), new AuthorizationContext(exchange)).block();
    return result != null && result.isGranted();
  }

  @ParameterizedTest(name = "{0} -> {1}")
  @CsvSource({
    "127.0.0.1, true",
    "127.8.9.10, true",
    "::1, true",
    "::ffff:127.0.0.1, true",
    "10.0.0.1, false",
    "192.168.1.20, false",
    "203.0.113.7, false",
    "::2, false",
    "fe80::1, false",
    "0.0.0.0, false"
  })
  void theTcpPeersAddressDecides(String address, boolean loopback) throws Exception {
    InetSocketAddress remote = new InetSocketAddress(InetAddress.getByName(address), 40_000);
    assertThat(LoopbackClients.isLoopback(remote)).isEqualTo(loopback);
    assertThat(granted(MockServerHttpRequest.get("/actuator/cache").remoteAddress(remote).build()))
        .isEqualTo(loopback);
  }

  /**
   * Spring's transformer gives the forwarded client's address as a name that is never resolved, so
   * no forwarded client counts as loopback, whatever it claims (as before this rule moved to Spring
   * Security): behind a proxy, the management port wants the token.
   */
  @ParameterizedTest(name = "X-Forwarded-For: {0}")
  @ValueSource(
      strings = {"127.0.0.1", "::1", "203.0.113.7", "localhost", "203.0.113.7, 127.0.0.1", "junk"})
  void behindTheFrameworksForwardedHeadersNoForwardedClientIsLoopback(String forwardedFor) {
    MockServerHttpRequest fromProxy =
        MockServerHttpRequest.get("/actuator/cache")
            .remoteAddress(new InetSocketAddress(InetAddress.getLoopbackAddress(), 40_000))
            .header("X-Forwarded-For", forwardedFor)
            .build();
    assertThat(granted(fromProxy))
        .as("the TCP peer, a proxy on loopback, when forwarded headers are not read")
        .isTrue();
    ServerHttpRequest forwarded = new ForwardedHeaderTransformer().apply(fromProxy);
    assertThat(forwarded.getRemoteAddress())
        .as("the forwarded address, as a name")
        .isNotNull()
        .satisfies(a -> assertThat(a.isUnresolved()).isTrue());
    assertThat(granted(MockServerWebExchange.from(fromProxy).mutate().request(forwarded).build()))
        .isFalse();
  }

  @Test
  void noOrAnUnresolvedAddressIsNotLoopback() {
    assertThat(LoopbackClients.isLoopback(null)).isFalse();
    assertThat(LoopbackClients.isLoopback(InetSocketAddress.createUnresolved("localhost", 1)))
        .isFalse();
    assertThat(granted(MockServerHttpRequest.get("/actuator/cache").build())).isFalse();
  }
}
