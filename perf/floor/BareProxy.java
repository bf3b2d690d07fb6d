/*
 * The floor of a pull-through cache on this runtime: a bare Reactor Netty server and client, the
 * same JVM and options as the service, nothing else. Serves /v2/<upstream-host>/<name>/manifests/<ref>
 * and .../blobs/<digest> (the shared bench's "inpath" form): a miss is fetched whole from the
 * upstream, its SHA-256 checked (blobs), written to a temporary file, forced to disk and renamed into
 * <cache>/; a hit is sent from the file. No single-flight, streaming, index, auth or limits: it is a
 * measuring stick for the cost of the layers the service adds, not a cache to run
 * (docs/performance.md, "The floor").
 *
 * Build and run against the extracted service jar's libraries (java -Djarmode=tools -jar
 * target/registry-cache-*.jar extract --destination /tmp/app):
 *   javac -cp "/tmp/app/lib/*" -d /tmp/floor perf/floor/BareProxy.java
 *   java <registry-cache.jvm-options> -cp "/tmp/floor:/tmp/app/lib/*" BareProxy <port> <upstream host:port> <cache dir>
 */
import io.netty.handler.codec.http.HttpResponseStatus;
import java.nio.channels.FileChannel;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.nio.file.*;
import java.security.MessageDigest;
import java.util.HexFormat;
import org.reactivestreams.Publisher;
import reactor.core.publisher.Mono;
import reactor.netty.http.client.HttpClient;
import reactor.netty.http.server.HttpServer;
import reactor.netty.http.server.HttpServerRequest;
import reactor.netty.http.server.HttpServerResponse;
import reactor.netty.resources.ConnectionProvider;

/** Probe: the floor of a pull-through on bare Reactor Netty (fetch whole, verify, fsync, rename, serve). */
public class BareProxy {
  static Path root;
  static HttpClient client;
  static final String ACCEPT = "application/vnd.oci.image.manifest.v1+json, application/vnd.oci.image.index.v1+json, application/vnd.docker.distribution.manifest.v2+json, application/vnd.docker.distribution.manifest.list.v2+json";

  public static void main(String[] a) throws Exception {
    int port = Integer.parseInt(a[0]);
    String upstream = a[1];
    root = Path.of(a[2]);
    for (String d : new String[] {"blobs", "manifests", "tmp"}) Files.createDirectories(root.resolve(d));
    client = HttpClient.create(ConnectionProvider.builder("up").maxConnections(64).build()).baseUrl("http://" + upstream);
    HttpServer.create().port(port)
        .handle(BareProxy::handle)
        .bindNow().onDispose().block();
  }

  static Publisher<Void> handle(HttpServerRequest req, HttpServerResponse res) {
    String uri = req.uri();
    if (uri.equals("/v2/") || uri.equals("/v2")) {
      return res.status(200).header("Docker-Distribution-API-Version", "registry/2.0").sendString(Mono.just("{}"));
    }
    String rest = uri.substring(4);
    rest = rest.substring(rest.indexOf('/') + 1); // drop <upstream>/
    int m = rest.lastIndexOf("/manifests/");
    int b = rest.lastIndexOf("/blobs/");
    try {
      if (m > 0) return manifest(rest.substring(0, m), rest.substring(m + 11), res);
      if (b > 0) return blob(rest.substring(0, b), rest.substring(b + 7), res);
    } catch (Exception e) {
      return res.status(500).send();
    }
    return res.status(404).send();
  }

  static String sha256(byte[] bytes) throws Exception {
    return "sha256:" + HexFormat.of().formatHex(MessageDigest.getInstance("SHA-256").digest(bytes));
  }

  static void store(Path dest, byte[] bytes) throws Exception {
    Path tmp = Files.createTempFile(root.resolve("tmp"), "f", ".part");
    try (FileChannel ch = FileChannel.open(tmp, StandardOpenOption.WRITE)) {
      ch.write(ByteBuffer.wrap(bytes));
      ch.force(false);
    }
    Files.createDirectories(dest.getParent());
    Files.move(tmp, dest, StandardCopyOption.ATOMIC_MOVE);
  }

  static Publisher<Void> manifest(String name, String ref, HttpServerResponse res) throws Exception {
    Path p = root.resolve("manifests").resolve(name.replace('/', '_') + "@" + ref.replace(':', '_'));
    if (Files.exists(p)) {
      byte[] all = Files.readAllBytes(p);
      int nl = indexOf(all, (byte) '\n');
      String type = new String(all, 0, nl, StandardCharsets.UTF_8);
      byte[] body = java.util.Arrays.copyOfRange(all, nl + 1, all.length);
      return res.header("Content-Type", type).header("Docker-Content-Digest", sha256(body))
          .header("Content-Length", String.valueOf(body.length)).sendByteArray(Mono.just(body));
    }
    return client.headers(h -> h.set("Accept", ACCEPT)).get().uri("/v2/" + name + "/manifests/" + ref)
        .responseSingle((r, body) -> body.asByteArray().map(bytes -> new Object[] {r.status().code(), r.responseHeaders().get("Content-Type"), bytes}))
        .flatMap(o -> {
          int status = (Integer) o[0];
          if (status != 200) return res.status(status).send();
          byte[] bytes = (byte[]) o[2];
          String type = (String) o[1];
          try {
            String digest = sha256(bytes);
            byte[] t = (type + "\n").getBytes(StandardCharsets.UTF_8);
            byte[] all = new byte[t.length + bytes.length];
            System.arraycopy(t, 0, all, 0, t.length);
            System.arraycopy(bytes, 0, all, t.length, bytes.length);
            store(p, all);
            return res.header("Content-Type", type).header("Docker-Content-Digest", digest)
                .header("Content-Length", String.valueOf(bytes.length)).sendByteArray(Mono.just(bytes)).then();
          } catch (Exception e) {
            return res.status(500).send();
          }
        });
  }

  static Publisher<Void> blob(String name, String digest, HttpServerResponse res) throws Exception {
    Path p = root.resolve("blobs").resolve(digest.substring(7, 9)).resolve(digest.substring(7));
    if (Files.exists(p)) {
      return res.header("Content-Length", String.valueOf(Files.size(p))).header("Content-Type", "application/octet-stream")
          .header("Docker-Content-Digest", digest).sendFile(p);
    }
    return client.get().uri("/v2/" + name + "/blobs/" + digest)
        .responseSingle((r, body) -> body.asByteArray().map(bytes -> new Object[] {r.status().code(), bytes}))
        .flatMap(o -> {
          int status = (Integer) o[0];
          if (status != 200) return res.status(status).send();
          byte[] bytes = (byte[]) o[1];
          try {
            if (!sha256(bytes).equals(digest)) return res.status(502).send();
            store(p, bytes);
            return res.header("Content-Length", String.valueOf(bytes.length)).header("Content-Type", "application/octet-stream")
                .header("Docker-Content-Digest", digest).sendByteArray(Mono.just(bytes)).then();
          } catch (Exception e) {
            return res.status(500).send();
          }
        });
  }

  static int indexOf(byte[] a, byte x) {
    for (int i = 0; i < a.length; i++) if (a[i] == x) return i;
    return -1;
  }
}
