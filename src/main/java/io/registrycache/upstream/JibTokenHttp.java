package io.registrycache.upstream;

import com.google.api.client.http.HttpTransport;
import com.google.api.client.http.apache.v2.ApacheHttpTransport;
import com.google.cloud.tools.jib.api.LogEvent;
import com.google.cloud.tools.jib.http.FailoverHttpClient;
import java.lang.reflect.Constructor;
import java.util.function.Consumer;
import java.util.function.Supplier;
import javax.net.ssl.SSLContext;
import org.apache.http.conn.ssl.SSLConnectionSocketFactory;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Builds the jib-core {@link FailoverHttpClient} for token requests of one upstream, with that
 * upstream's TLS and without jib's retry loop.
 *
 * <p>jib's public constructor uses the JVM-wide TLS settings and retries I/O failures with an
 * exponential back-off of up to 15 minutes. The constructor that takes transport suppliers and a
 * retry switch is package-private; it is reached by reflection (the class path's unnamed module
 * is open). When that fails (a different jib-core version) this falls back to the public
 * constructor and says so once in the log. {@code JibTokenHttpTest} pins the reflective path.
 *
 * <p>Failover: HTTP and "insecure HTTPS" failover is enabled only for {@code http://} upstreams
 * (the operator already chose plain HTTP), so an {@code http} token realm works there; the
 * "insecure" transport is the same verified transport, so jib never turns verification off on
 * its own. Credentials go over HTTP only to realms of {@code http://} upstreams.
 */
final class JibTokenHttp {

  private static final Logger log = LoggerFactory.getLogger(JibTokenHttp.class);

  private static volatile boolean warnedFallback;

  private JibTokenHttp() {}

  /** A new client; the caller must {@code shutDown()} it (jib keeps every transport it made). */
  static FailoverHttpClient create(Upstream upstream, UpstreamTls tls) {
    boolean plainHttpUpstream = "http".equals(upstream.url().getScheme());
    Consumer<LogEvent> logger =
        event -> log.debug("upstream '{}' token request: {}", upstream.key(), event.getMessage());
    SSLContext sslContext = tls.jdkContext();
    Supplier<HttpTransport> transport =
        () ->
            new ApacheHttpTransport(
                ApacheHttpTransport.newDefaultHttpClientBuilder()
                    .setSSLSocketFactory(
                        new SSLConnectionSocketFactory(sslContext, tls.hostnameVerifier()))
                    .build());
    try {
      return newClient(plainHttpUpstream, plainHttpUpstream, logger, transport);
    } catch (ReflectiveOperationException | RuntimeException e) {
      if (!warnedFallback) {
        warnedFallback = true;
        log.warn(
            "jib-core's FailoverHttpClient(…, Supplier, Supplier, boolean) constructor is not usable "
                + "({}); token requests use the JVM's default TLS settings and jib's retries",
            e.toString());
      }
      return new FailoverHttpClient(plainHttpUpstream, plainHttpUpstream, logger);
    }
  }

  /** The reflective call, separate so a test can pin it. */
  static FailoverHttpClient newClient(
      boolean enableHttpAndInsecureFailover,
      boolean sendAuthorizationOverHttp,
      Consumer<LogEvent> logger,
      Supplier<HttpTransport> transport)
      throws ReflectiveOperationException {
    Constructor<FailoverHttpClient> constructor =
        FailoverHttpClient.class.getDeclaredConstructor(
            boolean.class, boolean.class, Consumer.class, Supplier.class, Supplier.class, boolean.class);
    constructor.setAccessible(true);
    return constructor.newInstance(
        enableHttpAndInsecureFailover, sendAuthorizationOverHttp, logger, transport, transport, false);
  }
}
