package io.registrycache.testsupport;

import java.io.IOException;
import java.net.ServerSocket;
import java.util.ArrayList;
import java.util.List;

/** Ports free on this host right now, for ITs that must know them before they start a server. */
public final class FreePorts {

  private FreePorts() {}

  /**
   * {@code n} distinct ports, each bound once and closed again (all held at the same time, so no
   * two are the same); another process may take one before the caller binds it.
   */
  public static List<Integer> take(int n) throws IOException {
    List<ServerSocket> sockets = new ArrayList<>();
    try {
      for (int i = 0; i < n; i++) {
        sockets.add(new ServerSocket(0));
      }
      return sockets.stream().map(ServerSocket::getLocalPort).toList();
    } finally {
      for (ServerSocket s : sockets) {
        s.close();
      }
    }
  }
}
