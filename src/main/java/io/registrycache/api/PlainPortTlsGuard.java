package io.registrycache.api;

import com.github.benmanes.caffeine.cache.Cache;
import com.github.benmanes.caffeine.cache.Caffeine;
import io.netty.buffer.ByteBuf;
import io.netty.buffer.Unpooled;
import io.netty.channel.ChannelFutureListener;
import io.netty.channel.ChannelHandlerContext;
import io.netty.channel.ChannelInboundHandlerAdapter;
import io.netty.util.ReferenceCountUtil;
import java.net.InetSocketAddress;
import java.net.SocketAddress;
import java.nio.charset.StandardCharsets;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import org.springframework.boot.reactor.netty.NettyServerCustomizer;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Configuration;

/**
 * Answers a TLS handshake on the plain HTTP port with one log line and a plain-text 400, before the
 * HTTP codec sees it.
 *
 * <p>Clients of an "insecure" registry (skopeo, containerd, Docker) try HTTPS first and fall back
 * to HTTP when the server's first bytes are not a TLS record (Go's {@code tls.RecordHeaderError}).
 * Left to the HTTP codec, each such ClientHello is logged by Reactor Netty at WARN with a decoding
 * stack trace; here it costs one INFO line for the first from each client address since the service
 * started (every later one from that address at DEBUG: every pull of such a client starts with one,
 * and the fallback is expected, not a fault) and the same fallback for the client: an HTTP/1.1 400
 * response, then the connection is closed (as Go's own {@code net/http} server does). A TLS record
 * starts with content type 22 (handshake, RFC 8446 section 5.1), a byte no HTTP request line can
 * start with, so one byte decides.
 */
@Configuration(proxyBeanMethods = false)
public class PlainPortTlsGuard {

  private static final Logger log = LoggerFactory.getLogger(PlainPortTlsGuard.class);

  /** First byte of a TLS handshake record (RFC 8446 section 5.1, {@code ContentType.handshake}). */
  static final byte TLS_HANDSHAKE = 22;

  private static final byte[] BODY =
      "Client sent an HTTPS request to a plain HTTP port.\n".getBytes(StandardCharsets.US_ASCII);

  static final byte[] RESPONSE =
      ("HTTP/1.1 400 Bad Request\r\n"
              + "Content-Type: text/plain; charset=utf-8\r\n"
              + "Connection: close\r\n"
              + "Content-Length: "
              + BODY.length
              + "\r\n\r\n"
              + new String(BODY, StandardCharsets.US_ASCII))
          .getBytes(StandardCharsets.US_ASCII);

  /** Client addresses remembered at most (one forgotten logs at INFO again). */
  static final long MAX_ADDRESSES = 10_000;

  private final HandshakeLog handshakeLog = new HandshakeLog();

  /** Puts {@link TlsHelloHandler} first in every accepted connection's pipeline. */
  @Bean
  public NettyServerCustomizer tlsOnPlainPort() {
    return server ->
        server.doOnChannelInit(
            (observer, channel, remoteAddress) ->
                channel
                    .pipeline()
                    .addFirst("registryCache.tlsOnPlainPort", new TlsHelloHandler(handshakeLog)));
  }

  /**
   * The log line of a rejected handshake: INFO for the first from a client address (its IP, any
   * port) since the start, DEBUG for every later one.
   */
  static final class HandshakeLog {

    private final Cache<Object, Boolean> recent;

    HandshakeLog() {
      this.recent = Caffeine.newBuilder().maximumSize(MAX_ADDRESSES).build();
    }

    /** Logs one rejected handshake from {@code remote}; true when that line was at INFO. */
    boolean rejected(SocketAddress remote) {
      Object key =
          remote instanceof InetSocketAddress inet && inet.getAddress() != null
              ? inet.getAddress()
              : String.valueOf(remote);
      if (recent.asMap().putIfAbsent(key, Boolean.TRUE) == null) {
        log.info(
            "TLS handshake from {} on the plain HTTP port: answered 400, after which a client of an insecure"
                + " registry falls back to plain HTTP (skopeo --tls-verify=false, containerd, Docker); later ones from this"
                + " address at DEBUG",
            remote);
        return true;
      }
      log.debug(
          "TLS handshake from {} on the plain HTTP port: answered 400 (configure the client for plain HTTP)",
          remote);
      return false;
    }
  }

  /** Looks at the first inbound bytes of a connection once, then leaves the pipeline. */
  static final class TlsHelloHandler extends ChannelInboundHandlerAdapter {

    private final HandshakeLog handshakeLog;
    private boolean rejected;

    TlsHelloHandler(HandshakeLog handshakeLog) {
      this.handshakeLog = handshakeLog;
    }

    @Override
    public void channelRead(ChannelHandlerContext ctx, Object msg) {
      if (rejected) {
        ReferenceCountUtil.release(msg); // the rest of the ClientHello, read before the close
        return;
      }
      if (msg instanceof ByteBuf buf
          && buf.isReadable()
          && buf.getByte(buf.readerIndex()) == TLS_HANDSHAKE) {
        rejected = true;
        buf.release();
        handshakeLog.rejected(ctx.channel().remoteAddress());
        ctx.writeAndFlush(Unpooled.wrappedBuffer(RESPONSE))
            .addListener(ChannelFutureListener.CLOSE);
        return;
      }
      ctx.pipeline().remove(this);
      ctx.fireChannelRead(msg);
    }
  }
}
