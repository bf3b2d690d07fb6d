package io.registrycache.api;

import io.netty.handler.timeout.WriteTimeoutHandler;
import io.registrycache.config.BlobsProperties;
import java.util.concurrent.TimeUnit;
import org.springframework.boot.reactor.netty.NettyServerCustomizer;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Configuration;

/**
 * Closes a client's connection when one write of a response to it has not finished within {@code
 * registry-cache.blobs.send-timeout} (Netty's {@link WriteTimeoutHandler}): a client that stopped
 * reading. Its response is cancelled, and the buffers queued for it (a blob being filled holds its
 * readers' buffers in a shared budget) go back. An idle keep-alive connection has no write under
 * way and is not affected. 0 turns it off.
 */
@Configuration(proxyBeanMethods = false)
public class SendTimeout {

  /** Pipeline name of the handler. */
  static final String HANDLER = "registryCache.sendTimeout";

  /** Puts a {@link WriteTimeoutHandler} first (nearest the socket) in every accepted connection. */
  @Bean
  public NettyServerCustomizer sendTimeoutOnWrites(BlobsProperties blobs) {
    long millis = blobs.sendTimeout().toMillis();
    if (millis <= 0) {
      return server -> server;
    }
    return server ->
        server.doOnChannelInit(
            (observer, channel, remoteAddress) ->
                channel
                    .pipeline()
                    .addFirst(HANDLER, new WriteTimeoutHandler(millis, TimeUnit.MILLISECONDS)));
  }
}
