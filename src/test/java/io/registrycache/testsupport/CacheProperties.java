package io.registrycache.testsupport;

import java.nio.file.Path;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.function.Supplier;
import org.springframework.test.context.DynamicPropertyRegistry;

/**
 * The one way tests configure an in-process cache: the block every such test starts from (its
 * storage directory, the management port on a random port), the {@code local} upstream, then what
 * the test itself is about. Feeds a {@code @DynamicPropertySource} ({@link #addTo}) or a context
 * the test starts itself ({@link ManualCache#start(CacheProperties)}). Values are suppliers, read
 * when the context starts (a container's mapped port is known only then).
 */
public final class CacheProperties {

  /**
   * The host name tests give the {@code local} upstream: a valid path component for the in-path
   * form.
   */
  public static final String UPSTREAM_HOST = "upstream.test";

  private final Map<String, Supplier<?>> values = new LinkedHashMap<>();

  private CacheProperties() {}

  /** Storage at {@code storage}, the management port on a random port. */
  public static CacheProperties cache(Path storage) {
    return new CacheProperties()
        .set("registry-cache.storage.path", storage::toString)
        .set("management.server.port", "0");
  }

  /**
   * The {@code local} upstream at {@code url}, known to clients as {@code host}, and the default
   * upstream of bare {@code /v2/<name>/...} requests.
   */
  public CacheProperties localUpstream(String host, Supplier<String> url) {
    return set("registry-cache.default-upstream", "local")
        .set("registry-cache.upstreams.local.host", host)
        .set("registry-cache.upstreams.local.url", url);
  }

  /** {@link #localUpstream(String, Supplier)} with {@link #UPSTREAM_HOST}. */
  public CacheProperties localUpstream(Supplier<String> url) {
    return localUpstream(UPSTREAM_HOST, url);
  }

  /** One property of the {@code local} upstream: {@code registry-cache.upstreams.local.<name>}. */
  public CacheProperties upstream(String name, Object value) {
    return set("registry-cache.upstreams.local." + name, value);
  }

  /** Any property; a later value for the same key wins. */
  public CacheProperties set(String key, Object value) {
    return set(key, () -> value);
  }

  public CacheProperties set(String key, Supplier<?> value) {
    values.put(key, value);
    return this;
  }

  /** Registers every property, for {@code @DynamicPropertySource}. */
  public void addTo(DynamicPropertyRegistry registry) {
    values.forEach((key, value) -> registry.add(key, value::get));
  }

  /** {@code --key=value} command-line arguments, values read now. */
  public List<String> asArguments() {
    List<String> args = new ArrayList<>();
    values.forEach((key, value) -> args.add("--" + key + "=" + value.get()));
    return args;
  }
}
