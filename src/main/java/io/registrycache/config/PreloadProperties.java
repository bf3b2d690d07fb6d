package io.registrycache.config;

import java.nio.file.Path;
import java.util.List;
import org.springframework.boot.context.properties.ConfigurationProperties;
import org.springframework.boot.context.properties.bind.DefaultValue;

/**
 * {@code registry-cache.preload.*}: pulling images into the cache before any client asks, through
 * the same pull-through path as clients (docs/operations.md, "Preload").
 *
 * @param file image references to preload after start-up, one per line ({@code
 *     registry.example.com/team/app:v1}, {@code team/app@sha256:...}); {@code #} starts a comment.
 *     Read in the background once the service is ready; unset (the default) = nothing preloaded
 * @param platforms platforms ({@code os/architecture[/variant]}, e.g. {@code linux/amd64}) to take
 *     from an image index; empty (the default) = every platform of the index
 * @param concurrency how many images are preloaded at once; the blobs of one image are fetched one
 *     after another; default 3
 * @param includeReferrers whether preloading an image also preloads its referrers (signatures,
 *     SBOMs) and their blobs; default false
 */
@ConfigurationProperties("registry-cache.preload")
public record PreloadProperties(
    Path file,
    @DefaultValue List<String> platforms,
    @DefaultValue("3") int concurrency,
    @DefaultValue("false") boolean includeReferrers) {

  public PreloadProperties {
    platforms = List.copyOf(platforms);
  }
}
