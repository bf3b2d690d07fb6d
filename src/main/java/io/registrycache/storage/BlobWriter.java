package io.registrycache.storage;

import io.registrycache.oci.Digest;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.file.NoSuchFileException;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.security.MessageDigest;

/**
 * Writes one blob into a {@link FileBlobStore}: {@link #append} the bytes, then {@link #commit} them
 * with the expected size — the digest and size are checked there, so no caller can store
 * unverified content — or {@link #abort}. Until the commit the blob is not in the store; readers
 * may tail the bytes written so far ({@link #openReader}), and keep reading the same file once it
 * is committed.
 *
 * <p>One thread appends and commits; {@link #openReader} and {@link #abort} may come from others.
 */
public final class BlobWriter implements BlobStore.Writer {

  private final FileBlobStore store;
  private final Digest digest;
  private final Path temp;
  private final FileChannel out;
  private final MessageDigest md;
  private final Object lock = new Object();
  private volatile long written;
  /** What readers open: the temporary file, then the stored blob; {@code null} once aborted. */
  private Path readable;

  BlobWriter(FileBlobStore store, Digest digest, Path temp) throws IOException {
    this.store = store;
    this.digest = digest;
    this.temp = temp;
    this.out = FileChannel.open(temp, StandardOpenOption.CREATE_NEW, StandardOpenOption.WRITE);
    this.md = digest.newMessageDigest();
    this.readable = temp;
  }

  /** The digest the bytes must have. */
  @Override
  public Digest digest() {
    return digest;
  }

  /** Bytes appended so far. */
  @Override
  public long written() {
    return written;
  }

  /** Appends {@code bytes} (all of its remaining bytes). Blocking. */
  @Override
  public void append(ByteBuffer bytes) throws IOException {
    md.update(bytes.duplicate());
    long n = written;
    while (bytes.hasRemaining()) {
      n += out.write(bytes);
    }
    written = n;
  }

  /**
   * Verifies the bytes and makes the blob visible in the store under its digest, atomically.
   * Blocking.
   *
   * @param expectedSize the size the bytes must have, or -1 when unknown
   * @return the stored size in bytes
   * @throws ContentVerificationException when the size or the digest does not match; the bytes
   *     are deleted (as by {@link #abort})
   * @throws IOException when the file cannot be stored; the bytes are deleted
   */
  @Override
  public long commit(long expectedSize) throws IOException {
    long size = written;
    if (expectedSize >= 0 && size != expectedSize) {
      abort();
      throw new ContentVerificationException(
          "blob " + digest + ": got " + size + " bytes, " + expectedSize + " were announced");
    }
    if (!digest.matches(md)) {
      abort();
      throw new ContentVerificationException("blob " + digest + ": the " + size + " bytes do not match the digest");
    }
    try {
      out.force(false);
      out.close();
      synchronized (lock) {
        store.commitFile(digest, temp, size);
        readable = store.path(digest);
      }
    } catch (IOException | RuntimeException e) {
      abort();
      throw e;
    }
    store.writerClosed(digest, true);
    return size;
  }

  /** Deletes what was written; the store is unchanged. Idempotent; a no-op after a commit. */
  @Override
  public void abort() {
    synchronized (lock) {
      if (readable != temp) {
        return; // committed or aborted already
      }
      readable = null;
    }
    try {
      out.close();
    } catch (IOException ignored) {
      // the file goes anyway
    }
    StorageLayout.deleteQuietly(temp);
    store.writerClosed(digest, false);
  }

  /**
   * A channel reading the bytes written so far, and those written later: the same file before
   * and after the commit.
   *
   * @throws NoSuchFileException when the writer was aborted
   */
  @Override
  public FileChannel openReader() throws IOException {
    synchronized (lock) {
      if (readable == null) {
        throw new NoSuchFileException(temp.toString(), null, "the write of blob " + digest + " was aborted");
      }
      return FileChannel.open(readable, StandardOpenOption.READ);
    }
  }
}
