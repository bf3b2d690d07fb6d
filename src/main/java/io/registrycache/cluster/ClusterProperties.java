package io.registrycache.cluster;

import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import org.springframework.boot.context.properties.ConfigurationProperties;
import org.springframework.boot.context.properties.bind.ConstructorBinding;
import org.springframework.boot.context.properties.bind.DefaultValue;

/**
 * {@code registry-cache.cluster.*}: the replicas of a scaled-out cache (issue 11). With neither
 * {@code peers} nor {@code peers-dns} set (the default) the service is a single replica and nothing
 * here is used.
 *
 * @param peers static members, {@code host:port} or {@code [v6]:port}, the port being each member's
 *     {@code peer-port} (a bare host gets {@code peer-port}); may include this replica
 * @param peersDns a DNS name whose A/AAAA records are the members (a Kubernetes headless Service),
 *     each on {@code peer-port}; resolved at start-up and every {@code refresh-interval}
 * @param peerPort the port of this replica's internal peer endpoint ({@code
 *     /internal/v1/blobs/...}, served only when a cluster is configured), and the port of members
 *     given without one and of the addresses behind {@code peers-dns}; default 8082
 * @param refreshInterval how often {@code peers-dns} is resolved again; a failed lookup keeps the
 *     last members seen
 * @param self this replica's own {@code host:port} as the others reach it; when unset, the member
 *     whose address belongs to a local network interface and whose port is {@code peer-port}
 * @param token the shared bearer token replicas present to each other's peer endpoint; one of
 *     {@code token} and {@code token-file} is required when a cluster is configured (at least 16
 *     characters); never logged
 * @param tokenFile a file holding the token (surrounding whitespace ignored), e.g. a mounted
 *     Kubernetes Secret
 * @param connectTimeout how long a replica waits to connect to the owner of a blob before it
 *     fetches from the upstream itself; default 2 s
 * @param readTimeout how long a replica waits for the owner's response headers, and then between
 *     two reads of its body, before it fetches from the upstream itself; default 60 s
 * @param suspectFor how long a member that refused or timed out a connection is left out of
 *     ownership, so misses of the blobs it owns do not each wait for a connection to it first;
 *     default 10 s, {@code 0} never suspects
 * @param peerAddress the local address the peer port binds to (an IP literal or a host name of this
 *     machine, e.g. a private network's address or {@code 127.0.0.1}); default the pull port's
 *     {@code server.address}, and when that is unset every interface
 * @param firstByteTimeout how long a replica waits for a blob's or manifest's owner to start its
 *     answer (the response headers, counted from the request's start) before it asks the owner
 *     whether it is alive at all, on a second connection, waiting as long again for any answer: an
 *     owner that answers that is busy (e.g. waiting for its own upstream) and is waited for up to
 *     {@code read-timeout}; one that does not is hung (a stopped process whose kernel still accepts
 *     connections): it is suspected for {@code suspect-for} and the blob is fetched from the
 *     upstream here. So a hung owner costs a miss at most twice this; default 1 s, must be positive
 */
@ConfigurationProperties("registry-cache.cluster")
public record ClusterProperties(
    @DefaultValue List<String> peers,
    String peersDns,
    @DefaultValue("8082") int peerPort,
    @DefaultValue("10s") Duration refreshInterval,
    String self,
    String token,
    Path tokenFile,
    @DefaultValue("2s") Duration connectTimeout,
    @DefaultValue("60s") Duration readTimeout,
    @DefaultValue("10s") Duration suspectFor,
    String peerAddress,
    @DefaultValue("1s") Duration firstByteTimeout) {

  @ConstructorBinding
  public ClusterProperties {
    peers = List.copyOf(peers);
    if (peerPort < 1 || peerPort > 65_535) {
      throw new IllegalArgumentException(
          "registry-cache.cluster.peer-port out of range: " + peerPort);
    }
    requirePositive("refresh-interval", refreshInterval);
    requirePositive("connect-timeout", connectTimeout);
    requirePositive("read-timeout", readTimeout);
    requirePositive("first-byte-timeout", firstByteTimeout);
    if (suspectFor.isNegative()) {
      throw new IllegalArgumentException(
          "registry-cache.cluster.suspect-for must not be negative: " + suspectFor);
    }
    peers.forEach(p -> Member.parse(p, peerPort)); // fail at start-up, not at the first pull
    if (peerAddress != null && peerAddress.isBlank()) {
      peerAddress = null;
    }
  }

  /** The membership settings alone, with no token and the default timeouts (tests, tools). */
  public ClusterProperties(
      List<String> peers, String peersDns, int peerPort, Duration refreshInterval, String self) {
    this(
        peers,
        peersDns,
        peerPort,
        refreshInterval,
        self,
        null,
        null,
        Duration.ofSeconds(2),
        Duration.ofSeconds(60),
        Duration.ofSeconds(10),
        null);
  }

  /** Every setting but {@code first-byte-timeout}, which gets its default of 1 s (tests, tools). */
  public ClusterProperties(
      List<String> peers,
      String peersDns,
      int peerPort,
      Duration refreshInterval,
      String self,
      String token,
      Path tokenFile,
      Duration connectTimeout,
      Duration readTimeout,
      Duration suspectFor,
      String peerAddress) {
    this(
        peers,
        peersDns,
        peerPort,
        refreshInterval,
        self,
        token,
        tokenFile,
        connectTimeout,
        readTimeout,
        suspectFor,
        peerAddress,
        Duration.ofSeconds(1));
  }

  private static void requirePositive(String name, Duration value) {
    if (value.isNegative() || value.isZero()) {
      throw new IllegalArgumentException(
          "registry-cache.cluster." + name + " must be positive: " + value);
    }
  }

  /** Whether more than one replica is configured: a static list or a DNS name. */
  public boolean enabled() {
    return !peers.isEmpty() || (peersDns != null && !peersDns.isBlank());
  }

  /** Everything but the token, which must never reach a log line. */
  @Override
  public String toString() {
    return "ClusterProperties[peers="
        + peers
        + ", peersDns="
        + peersDns
        + ", peerPort="
        + peerPort
        + ", refreshInterval="
        + refreshInterval
        + ", self="
        + self
        + ", token="
        + (token == null ? "unset" : "(set)")
        + ", tokenFile="
        + tokenFile
        + ", connectTimeout="
        + connectTimeout
        + ", readTimeout="
        + readTimeout
        + ", suspectFor="
        + suspectFor
        + ", peerAddress="
        + peerAddress
        + ", firstByteTimeout="
        + firstByteTimeout
        + "]";
  }
}
