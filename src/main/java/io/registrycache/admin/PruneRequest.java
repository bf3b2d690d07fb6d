package io.registrycache.admin;

import com.google.re2j.Pattern;
import java.time.Duration;

/**
 * What a prune removes: the tag links matching every criterion given, then the content only they
 * used. At least one criterion is required.
 *
 * @param olderThan remove tags whose manifest was last pulled longer ago than this; also manifests
 *     pulled by digest only and blobs referenced by nothing, when no {@code pattern} is given;
 *     {@code null} for no age criterion
 * @param pattern remove tags whose {@code <upstream>/<repository>:<tag>} matches this regular
 *     expression (RE2 syntax, linear time) in full; {@code null} for no pattern criterion
 * @param keep keep the {@code keep} most recently pulled tags of each repository, remove the
 *     others; {@code null} for no count criterion
 * @param dryRun report what would go, remove nothing
 */
public record PruneRequest(Duration olderThan, Pattern pattern, Integer keep, boolean dryRun) {

  public PruneRequest {
    if (olderThan == null && pattern == null && keep == null) {
      throw new IllegalArgumentException("give at least one of olderThan, pattern, keep");
    }
    if (olderThan != null && olderThan.isNegative()) {
      throw new IllegalArgumentException("olderThan must not be negative");
    }
    if (keep != null && keep < 0) {
      throw new IllegalArgumentException("keep must not be negative");
    }
  }
}
