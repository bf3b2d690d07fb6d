package io.registrycache.storage;

/**
 * What the in-memory index knows of one stored blob or manifest: its size and times.
 *
 * <p>{@code lastPulledMillis} is written by every hit without a lock (a plain volatile store of a
 * long; racing writers store nearly the same value), at most once per {@link
 * #TOUCH_RESOLUTION_MILLIS}. {@code persistedMillis} is the last-pulled time last written to the
 * file's access time by the janitor.
 */
public class StoredItem {

  /** Hits closer together than this do not update the last-pulled time. */
  static final long TOUCH_RESOLUTION_MILLIS = 1000;

  final long size;
  final long createdMillis;
  volatile long lastPulledMillis;
  volatile long persistedMillis;

  StoredItem(long size, long createdMillis, long lastPulledMillis) {
    this.size = size;
    this.createdMillis = createdMillis;
    this.lastPulledMillis = lastPulledMillis;
    this.persistedMillis = lastPulledMillis;
  }

  /** Size in bytes. */
  public long size() {
    return size;
  }

  /** When it was stored (its file's mtime), epoch milliseconds. */
  public long createdMillis() {
    return createdMillis;
  }

  /** When a client last pulled it (or a manifest referencing it), epoch milliseconds. */
  public long lastPulledMillis() {
    return lastPulledMillis;
  }

  /** Records a pull at {@code now}; returns whether the time moved. */
  public boolean touch(long now) {
    if (now - lastPulledMillis >= TOUCH_RESOLUTION_MILLIS) {
      lastPulledMillis = now;
      return true;
    }
    return false;
  }
}
