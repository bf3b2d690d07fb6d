package io.registrycache.api;

import io.netty.channel.ChannelHandlerContext;
import io.netty.handler.timeout.WriteTimeoutHandler;
import io.registrycache.config.BlobsProperties;
import java.time.Duration;
import java.util.concurrent.TimeUnit;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import org.springframework.boot.reactor.netty.NettyServerCustomizer;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Configuration;

/**
 * Closes a client's connection when one write of a response to it has not finished within {@code
 * registry-cache.blobs.send-timeout} (Netty's {@link WriteTimeoutHandler}): a client that stopped
 * reading. Its response is cancelled, and the buffers queued for it (a blob being filled holds its
 * readers' buffers in a shared budget) go back. An idle keep-alive connection has no write under
 * way and is not affected. 0 turns it off. Each cut is one INFO line naming the client.
 */
@Configuration(proxyBeanMethods = false)
public class SendTimeout {

  private static final Logger log = LoggerFactory.getLogger(SendTimeout.class);

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
                channel.pipeline().addFirst(HANDLER, new Cut(blobs.sendTimeout())));
  }

  /**
   * Logs the cut and closes the connection, without the exception Netty's handler fires (Reactor
   * Netty would log it at WARN with no word of what happened).
   */
  static final class Cut extends WriteTimeoutHandler {
    private final Duration timeout;

    Cut(Duration timeout) {
      super(timeout.toMillis(), TimeUnit.MILLISECONDS);
      this.timeout = timeout;
    }

    @Override
    protected void writeTimedOut(ChannelHandlerContext ctx) {
      log.info(
          "closed the connection of {}: a write to it waited {} s, the client stopped reading"
              + " (registry-cache.blobs.send-timeout)",
          ctx.channel().remoteAddress(),
          timeout.toSeconds());
      // the connection is dropped either way: a failed close leaves nothing to do
      var _ = ctx.close();
    }
  }
}
