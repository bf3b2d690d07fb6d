package io.registrycache.api;

import static org.assertj.core.api.Assertions.assertThat;

import java.net.URI;
import org.junit.jupiter.api.Test;
import org.springframework.boot.availability.ApplicationAvailability;
import org.springframework.boot.availability.AvailabilityChangeEvent;
import org.springframework.boot.availability.AvailabilityState;
import org.springframework.boot.availability.ReadinessState;
import org.springframework.http.HttpMethod;
import org.springframework.http.HttpStatus;
import org.springframework.mock.web.reactive.function.server.MockServerRequest;
import org.springframework.web.reactive.function.server.ServerResponse;

/**
 * {@code /v2/} answers by the application's readiness: 503 {@code UNAVAILABLE} with {@code
 * Retry-After} while the service starts or stops, so that no client pull runs while the start-up
 * still takes the CPU.
 */
class RegistryHandlerReadinessTest {

  private static ApplicationAvailability readiness(ReadinessState state) {
    return new ApplicationAvailability() {
      @Override
      @SuppressWarnings("unchecked")
      public <S extends AvailabilityState> S getState(Class<S> type, S defaultState) {
        return type == ReadinessState.class ? (S) state : defaultState;
      }

      @Override
      public <S extends AvailabilityState> S getState(Class<S> type) {
        return getState(type, null);
      }

      @Override
      public <S extends AvailabilityState> AvailabilityChangeEvent<S> getLastChangeEvent(
          Class<S> type) {
        return null;
      }
    };
  }

  private static ServerResponse base(ReadinessState state, HttpMethod method) {
    RegistryHandler handler = new RegistryHandler(null, null, null, null, null, readiness(state));
    return handler
        .base(MockServerRequest.builder().method(method).uri(URI.create("/v2/")).build())
        .block();
  }

  @Test
  void whileRefusingTrafficTheVersionCheckIs503WithRetryAfter() {
    for (HttpMethod method : new HttpMethod[] {HttpMethod.GET, HttpMethod.HEAD}) {
      ServerResponse response = base(ReadinessState.REFUSING_TRAFFIC, method);
      assertThat(response.statusCode()).isEqualTo(HttpStatus.SERVICE_UNAVAILABLE);
      assertThat(response.headers().getFirst("Retry-After")).isEqualTo("1");
    }
  }
}
