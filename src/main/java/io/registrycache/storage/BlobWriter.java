package io.registrycache.storage;

import io.registrycache.oci.Digest;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.file.FileStore;
import java.nio.file.Files;
import java.nio.file.NoSuchFileException;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.security.MessageDigest;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.function.LongSupplier;

/**
 * Writes one blob into a store through a local temporary file: {@link #append} the bytes, then
 * {@link #commit} them with the expected size — the digest and size are checked there, so no caller
 * can store unverified content — or {@link #abort}. Until the commit the blob is not in the store;
 * readers may tail the bytes written so far ({@link #openReader}), and keep reading a file with the
 * same bytes once it is committed. What the store does with the verified file is its {@link
 * BlobSink}: {@link FileBlobStore} renames it into place, the S3-API store uploads it.
 *
 * <p>One thread appends and commits; {@link #openReader} and {@link #abort} may come from others.
 */
public final class BlobWriter implements ContentWriter {

  /** STORING: the sink's {@code store} runs, without the lock (readers keep opening meanwhile). */
  private enum State {
    OPEN,
    STORING,
    COMMITTED,
    ABORTED
  }

  /** The volume of each temporary folder, found once (finding it reads the mount table). */
  private static final Map<Path, Volume> VOLUMES = new ConcurrentHashMap<>();

  private static Volume volumeOf(Path folder) throws IOException {
    Volume known = VOLUMES.get(folder);
    if (known == null) {
      FileStore store = Files.getFileStore(folder);
      known =
          VOLUMES.computeIfAbsent(folder, f -> new Volume(store::getUsableSpace, System::nanoTime));
    }
    return known;
  }

  /**
   * The usable space of one volume for {@link #reserve}, measured ({@code statvfs}) only when a
   * reservation is not clearly small against the last measurement: a blob is taken without a new
   * measurement when the last one is younger than {@value #FRESH_NANOS} ns and this blob plus the
   * bytes taken since then are at most 1/{@value #SHARE} of the space it found. So an acceptance is
   * at most 1 s stale, and wrong only when something other than this cache's writers used more than
   * 63/64 of the free space in that second; a refusal always rests on a measurement made for it
   * (and the next reservation measures again). Thread-safe.
   */
  static final class Volume {
    /** How long a measurement is used for small reservations: 1 s, in nanoseconds. */
    static final long FRESH_NANOS = 1_000_000_000L;

    /** Reservations since a measurement may take up to 1/SHARE of the space it found. */
    static final long SHARE = 64;

    /** The usable bytes of the volume, measured now. */
    interface Usable {
      long bytes() throws IOException;
    }

    private final Usable usable;
    private final LongSupplier nanoTime;
    private long measured = -1;
    private long measuredAt;
    private long taken;

    Volume(Usable usable, LongSupplier nanoTime) {
      this.usable = usable;
      this.nanoTime = nanoTime;
    }

    /**
     * Takes {@code size} bytes if they fit.
     *
     * @param size bytes, or negative when unknown (always fits, as before any byte is known)
     * @return -1 when they fit; else the usable bytes just measured, fewer than {@code size}
     * @throws IOException when the volume cannot be measured
     */
    long take(long size) throws IOException {
      if (size < 0) {
        return -1;
      }
      synchronized (this) {
        if (measured >= 0
            && nanoTime.getAsLong() - measuredAt < FRESH_NANOS
            && size <= measured / SHARE - taken) {
          taken += size;
          return -1;
        }
      }
      long at = nanoTime.getAsLong();
      long free = usable.bytes();
      boolean fits = size <= free;
      synchronized (this) {
        measured = free;
        measuredAt = at;
        taken = fits ? size : 0;
      }
      return fits ? -1 : free;
    }
  }

  private final BlobSink sink;
  private final Digest digest;
  private final Path temp;
  private final FileChannel out;
  private final MessageDigest md;
  private final Object lock = new Object();
  private volatile long written;

  /** Size and digest checked out ({@link #verify}); the digest state is consumed then. */
  private boolean verified;

  private State state = State.OPEN;

  /** What readers open: the temporary file, then what the sink names. */
  private Path readable;

  /**
   * A writer of {@code digest} into the new file {@code temp}.
   *
   * @throws IOException when {@code temp} cannot be created (or exists)
   */
  public BlobWriter(Digest digest, Path temp, BlobSink sink) throws IOException {
    this.sink = sink;
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
    if (verified) {
      throw new IllegalStateException("blob " + digest + " was verified; nothing can be appended");
    }
    md.update(bytes.duplicate());
    long n = written;
    while (bytes.hasRemaining()) {
      n += out.write(bytes);
    }
    written = n;
    sink.appended(temp, n);
  }

  /**
   * Checks that {@code size} bytes fit in the usable space of the temporary file's volume: every
   * blob passes through it, on either store. Measures the volume ({@code statvfs}) only when the
   * blob is not clearly small against the last measurement, which may then be up to 1 s old (see
   * {@link Volume}): a {@code statvfs} per small blob cost 0.4 % of a cold pull's CPU.
   *
   * @param size bytes, or negative when unknown (then nothing is checked)
   * @throws IOException "No space left on device" when they do not fit (a measurement made now says
   *     so), or when the volume cannot be measured
   */
  @Override
  public void reserve(long size) throws IOException {
    long free = volumeOf(temp.getParent()).take(size);
    if (free >= 0) {
      throw new IOException(
          "No space left on device: blob "
              + digest
              + " needs "
              + size
              + " bytes, "
              + free
              + " are free on the volume of "
              + temp.getParent());
    }
  }

  /** Appends {@code bytes} in order with one gathering write (the digest over each). Blocking. */
  @Override
  public void append(ByteBuffer[] bytes) throws IOException {
    if (verified) {
      throw new IllegalStateException("blob " + digest + " was verified; nothing can be appended");
    }
    long total = 0;
    for (ByteBuffer b : bytes) {
      md.update(b.duplicate());
      total += b.remaining();
    }
    long n = written;
    long done = 0;
    while (done < total) {
      done += out.write(bytes);
    }
    written = n + total;
    sink.appended(temp, written);
  }

  /**
   * Verifies the bytes and makes the blob visible in the store under its digest, atomically.
   * Blocking.
   *
   * @param expectedSize the size the bytes must have, or -1 when unknown
   * @return the stored size in bytes
   * @throws ContentVerificationException when the size or the digest does not match; the bytes are
   *     deleted (as by {@link #abort})
   * @throws IOException when the file cannot be stored; the bytes are deleted
   */
  @Override
  public long commit(long expectedSize) throws IOException {
    long size = verified ? written : verify(expectedSize);
    try {
      out.force(false);
      out.close();
      synchronized (lock) {
        if (state != State.OPEN) {
          throw new IOException("the write of blob " + digest + " was aborted");
        }
        state = State.STORING;
      }
      // Not under the lock: a store step can take long (an fsync, an object-store upload), and
      // readers opening the file meanwhile must not wait for it (they open temp; see openReader).
      Path stored = sink.store(temp, size);
      synchronized (lock) {
        readable = stored;
        state = State.COMMITTED;
        lock.notifyAll();
      }
    } catch (IOException | RuntimeException e) {
      synchronized (lock) {
        if (state == State.STORING) {
          state = State.OPEN; // so that the abort below deletes what the sink did not take
        }
      }
      abort();
      throw e;
    }
    sink.closed(true);
    return size;
  }

  @Override
  public long verify(long expectedSize) {
    long size = written;
    if (verified) {
      return size;
    }
    if (expectedSize >= 0 && size != expectedSize) {
      abort();
      throw new ContentVerificationException(
          "blob " + digest + ": got " + size + " bytes, " + expectedSize + " were announced");
    }
    if (!digest.matches(md)) {
      abort();
      throw new ContentVerificationException(
          "blob " + digest + ": the " + size + " bytes do not match the digest");
    }
    verified = true;
    return size;
  }

  @Override
  public void ownerGaveUp() {
    sink.ownerGaveUp();
  }

  /**
   * Deletes what was written; the store is unchanged. Idempotent; a no-op after a commit, and while
   * one is storing (that commit then stores, or fails and deletes).
   */
  @Override
  public void abort() {
    synchronized (lock) {
      if (state != State.OPEN) {
        return; // storing, committed or aborted already
      }
      state = State.ABORTED;
      readable = null;
      lock.notifyAll();
    }
    try {
      out.close();
    } catch (IOException ignored) {
      // the file goes anyway
    }
    StorageLayout.deleteQuietly(temp);
    sink.closed(false);
  }

  /**
   * A channel reading the bytes written so far, and those written later: a file with the same bytes
   * before and after the commit.
   *
   * @throws NoSuchFileException when the writer was aborted
   */
  @Override
  public FileChannel openReader() throws IOException {
    Path path;
    synchronized (lock) {
      if (state == State.ABORTED) {
        throw aborted();
      }
      path = readable;
    }
    try {
      return FileChannel.open(path, StandardOpenOption.READ);
    } catch (NoSuchFileException movedMeanwhile) {
      // The store step has just renamed temp to its content address: wait for it to say where
      // (the rename is its last step but the index update), then open that.
      synchronized (lock) {
        while (state == State.STORING) {
          try {
            lock.wait();
          } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw movedMeanwhile;
          }
        }
        if (state == State.ABORTED || readable.equals(path)) {
          throw state == State.ABORTED ? aborted() : movedMeanwhile;
        }
        path = readable;
      }
      return FileChannel.open(path, StandardOpenOption.READ);
    }
  }

  private NoSuchFileException aborted() {
    return new NoSuchFileException(
        temp.toString(), null, "the write of blob " + digest + " was aborted");
  }
}
