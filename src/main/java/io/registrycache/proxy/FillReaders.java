package io.registrycache.proxy;

import java.util.ArrayList;
import java.util.List;
import reactor.core.publisher.Mono;
import reactor.core.publisher.Sinks;

/**
 * Where the readers of one blob download are, for the fill's pace: the fill goes no more than
 * {@link BlobDownload#PACE_BYTES} ahead of the fastest reader still wanting bytes, so a reader
 * keeping up takes every byte from memory, and no slower reader holds the fill. Guarded by its
 * {@link FillWindow}'s lock: every method is called under it.
 */
final class FillReaders {

  /**
   * Where one reader is: its next byte, and the end of its range (exclusive; MAX_VALUE: the blob's
   * end).
   */
  static final class Position {
    private volatile long next; // written under the window's lock
    private final long end;

    private Position(long next, long end) {
      this.next = next;
      this.end = end;
    }

    long next() {
      return next;
    }

    long end() {
      return end;
    }

    void moveTo(long offset) {
      next = offset;
    }
  }

  private final List<Position> all = new ArrayList<>();
  private Sinks.Empty<Void> pause;

  Position open(long start, long endExclusive) {
    Position p = new Position(start, endExclusive < 0 ? Long.MAX_VALUE : endExclusive);
    all.add(p);
    return p;
  }

  /** Returns the number of readers left. */
  int close(Position reader) {
    all.remove(reader);
    return all.size();
  }

  int count() {
    return all.size();
  }

  /**
   * Completes at once unless a reader still wants bytes and the one furthest ahead is {@link
   * BlobDownload#PACE_BYTES} or more behind {@code received}; then once it is within half of that
   * (or wants no more, or leaves): see {@link #resumable}.
   */
  Mono<Void> pause(long received) {
    if (behind(received) < BlobDownload.PACE_BYTES) {
      return Mono.empty();
    }
    if (pause == null) {
      pause = Sinks.empty();
    }
    return pause.asMono();
  }

  /**
   * The pause to end (outside the lock) now that the fastest reader is close enough to {@code
   * received}, or null.
   */
  Sinks.Empty<Void> resumable(long received) {
    if (pause == null || behind(received) >= BlobDownload.PACE_BYTES / 2) {
      return null;
    }
    Sinks.Empty<Void> p = pause;
    pause = null;
    return p;
  }

  /** How far the fastest reader still wanting bytes is behind {@code received} (0 without one). */
  private long behind(long received) {
    long fastest = fastest();
    return fastest < 0 ? 0 : received - fastest;
  }

  /** The next byte of the reader furthest ahead among those still wanting bytes, -1 without one. */
  long fastest() {
    long fastest = -1;
    for (int i = 0; i < all.size(); i++) {
      Position p = all.get(i);
      if (p.next < p.end) {
        fastest = Math.max(fastest, p.next);
      }
    }
    return fastest;
  }
}
