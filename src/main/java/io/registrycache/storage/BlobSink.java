package io.registrycache.storage;

import java.io.IOException;
import java.nio.file.Path;

/** A store's side of a {@link BlobWriter}: what happens to the bytes. */
public interface BlobSink {
  /**
   * Bytes {@code [0, written)} are in {@code temp} now (called after each append, on the appending
   * thread; blocking allowed). The S3-API store uploads full parts from here.
   */
  default void appended(Path temp, long written) throws IOException {}

  /**
   * Makes the verified bytes of {@code temp} ({@code size} bytes, forced to disk) visible under the
   * digest, atomically; called once, only after the size and digest checked out.
   *
   * @return the file readers open from now on (the stored file, or {@code temp} itself when the
   *     store keeps it for a while)
   * @throws IOException when the bytes cannot be stored; the writer then aborts
   */
  Path store(Path temp, long size) throws IOException;

  /**
   * The write ended: stored, or not (aborted, failed verification, failed store): then anything
   * started for it must be dropped. Called once; must not throw.
   */
  void closed(boolean stored);

  /** {@link ContentWriter#ownerGaveUp}; may come from any thread. */
  default void ownerGaveUp() {}
}
