package io.registrycache.management;

import static io.registrycache.management.ManagementTokenTest.send;
import static org.assertj.core.api.Assertions.assertThat;

import io.registrycache.RegistryCacheApplication;
import io.registrycache.testsupport.CacheProperties;
import io.registrycache.testsupport.TestFiles;
import java.net.Inet4Address;
import java.net.InetAddress;
import java.net.NetworkInterface;
import java.net.SocketException;
import java.net.http.HttpResponse;
import java.nio.file.Path;
import java.util.Optional;
import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.Test;
import org.springframework.boot.test.context.SpringBootTest;
import org.springframework.boot.test.web.server.LocalManagementPort;
import org.springframework.test.context.DynamicPropertyRegistry;
import org.springframework.test.context.DynamicPropertySource;

/**
 * The default, without a token: the admin operations answer loopback clients only (so {@code ./mvnw
 * spring-boot:run} works as is), other clients get 403; health and prometheus stay open. Skipped
 * where the machine has no address but loopback; {@link LoopbackClientsTest} covers the decision
 * itself.
 */
@SpringBootTest(
    classes = RegistryCacheApplication.class,
    webEnvironment = SpringBootTest.WebEnvironment.RANDOM_PORT)
class ManagementLoopbackTest {

  static final Path storage = TestFiles.tempDirectory("registry-cache-admin-loopback-");

  @LocalManagementPort int managementPort;

  @DynamicPropertySource
  static void properties(DynamicPropertyRegistry registry) {
    CacheProperties.cache(storage).addTo(registry);
  }

  /**
   * An IPv4 address of this machine that is not loopback, for a connection that is not from
   * loopback.
   */
  private static Optional<String> nonLoopbackAddress() throws SocketException {
    return NetworkInterface.networkInterfaces()
        .filter(
            i -> {
              try {
                return i.isUp() && !i.isLoopback();
              } catch (SocketException e) {
                return false;
              }
            })
        .flatMap(NetworkInterface::inetAddresses)
        .filter(a -> a instanceof Inet4Address && !a.isLoopbackAddress() && !a.isLinkLocalAddress())
        .map(InetAddress::getHostAddress)
        .findFirst();
  }

  @Test
  void loopbackClientsMayUseTheAdminApi() throws Exception {
    HttpResponse<String> janitor =
        send("POST", "http://127.0.0.1:" + managementPort + "/actuator/cache/janitor");
    assertThat(janitor.statusCode()).as(janitor.body()).isEqualTo(200);
  }

  @Test
  void otherClientsAreRefusedButHealthIsOpen() throws Exception {
    Optional<String> address = nonLoopbackAddress();
    Assumptions.assumeTrue(
        address.isPresent(), "this machine has no non-loopback IPv4 address to connect from");
    String base = "http://" + address.get() + ":" + managementPort + "/actuator";
    for (String[] call :
        new String[][] {
          {"POST", "/cache/janitor"}, {"POST", "/cache/prune"}, {"GET", "/cache/images"}
        }) {
      HttpResponse<String> r = send(call[0], base + call[1]);
      assertThat(r.statusCode()).as(call[0] + " " + call[1]).isEqualTo(403);
      assertThat(r.body()).contains("loopback clients only");
    }
    assertThat(send("GET", base + "/health/readiness").statusCode()).isEqualTo(200);
    assertThat(send("GET", base + "/prometheus").statusCode()).isEqualTo(200);
  }
}
