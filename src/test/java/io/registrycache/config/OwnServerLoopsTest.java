package io.registrycache.config;

import static org.assertj.core.api.Assertions.assertThat;

import io.registrycache.testsupport.CacheClient;
import io.registrycache.testsupport.CacheProperties;
import io.registrycache.testsupport.ManualCache;
import io.registrycache.testsupport.TestFiles;
import java.net.http.HttpResponse;
import org.junit.jupiter.api.Test;

/**
 * Two services in one JVM, one closed: the other keeps serving. Each context's HTTP servers run on
 * event loops of its own ({@link RuntimeConfiguration#ownServerLoops()}); on Reactor Netty's
 * JVM-wide loops, closing the first context would dispose the loops the second one's servers run
 * on. Failsafe reuses its JVMs for many IT classes on this (docs/testing.md).
 */
class OwnServerLoopsTest {

  @Test
  void closingOneContextLeavesTheOtherContextsServersRunning() {
    try (ManualCache staying =
        ManualCache.start(CacheProperties.cache(TestFiles.tempDirectory("own-loops-a-")))) {
      CacheClient client = staying.client();
      assertThat(client.get("/v2/").statusCode()).isEqualTo(200);
      try (ManualCache closing =
          ManualCache.start(CacheProperties.cache(TestFiles.tempDirectory("own-loops-b-")))) {
        assertThat(closing.client().get("/v2/").statusCode()).isEqualTo(200);
      }
      // a new connection: the first one's channel could otherwise hide a closed server socket
      HttpResponse<byte[]> after = new CacheClient(client.baseUrl()).get("/v2/");
      assertThat(after.statusCode())
          .as("the remaining service answers on its pull port")
          .isEqualTo(200);
      assertThat(Thread.getAllStackTraces().keySet().stream().map(Thread::getName))
          .as("the servers' event loop threads keep Reactor Netty's name")
          .anyMatch(name -> name.startsWith("reactor-http-"));
    }
  }
}
