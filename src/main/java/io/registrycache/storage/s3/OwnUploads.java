package io.registrycache.storage.s3;

import io.registrycache.storage.StorageLayout;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.util.ArrayList;
import java.util.List;
import java.util.UUID;
import java.util.stream.Stream;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * This replica's record of the multipart uploads it started and has not yet completed or aborted:
 * one small file per upload under {@code <storage.path>/s3-uploads/} holding the key and the upload
 * id, written right after the upload is started and deleted once it is completed or aborted. What
 * is left at start-up are the uploads of a fill this replica did not finish (it was killed, or its
 * abort failed): the store aborts them then ({@link S3BlobBackend}), without waiting for {@code
 * abandoned-upload-age}. The store's own listing of uploads cannot tell replicas apart (every
 * replica signs with the same credentials, and an upload's metadata is not listed), so this record
 * is how a replica knows which uploads are its own. A replica that starts on an empty {@code
 * storage.path} (a new pod) has no record of a dead predecessor's uploads; those go when the blob's
 * next owner completes it, or after {@code abandoned-upload-age}.
 *
 * <p>Files are written with {@link StorageLayout#writeAtomically}-like care (a temporary name, then
 * a move), so a record is whole or absent. Blocking (start-up and the fill's own thread).
 */
final class OwnUploads {

  private static final Logger log = LoggerFactory.getLogger(OwnUploads.class);

  /** The folder under {@code storage.path}. */
  static final String FOLDER = "s3-uploads";

  private static final String SUFFIX = ".upload";

  /** An upload this replica started: its key (relative to the store's prefix) and id. */
  record Recorded(Path file, String key, String uploadId) {}

  private final Path folder;

  /**
   * @throws IOException when the folder cannot be created
   */
  OwnUploads(StorageLayout layout) throws IOException {
    this.folder = layout.root().resolve(FOLDER);
    Files.createDirectories(folder);
  }

  /**
   * Records an upload just started. A failure is logged, not thrown: the upload then goes at the
   * next owner's completion or after {@code abandoned-upload-age}, as before this record existed.
   *
   * @return the record's file, to {@link #forget} when the upload is completed or aborted; null
   *     when it could not be written
   */
  Path record(String key, String uploadId) {
    String name = UUID.randomUUID().toString();
    Path temp = folder.resolve(name + ".tmp");
    Path file = folder.resolve(name + SUFFIX);
    try {
      Files.writeString(temp, key + "\n" + uploadId + "\n", StandardCharsets.UTF_8);
      Files.move(temp, file, StandardCopyOption.ATOMIC_MOVE);
      return file;
    } catch (IOException e) {
      log.warn("cannot record upload of {} under {}: {}", key, folder, e.toString());
      StorageLayout.deleteQuietly(temp);
      return null;
    }
  }

  /** Drops the record of an upload completed or aborted; {@code file} may be null. */
  void forget(Path file) {
    if (file != null) {
      StorageLayout.deleteQuietly(file);
    }
  }

  /** The uploads recorded and not forgotten: those a previous run of this replica left open. */
  List<Recorded> left() throws IOException {
    List<Recorded> out = new ArrayList<>();
    try (Stream<Path> files = Files.list(folder)) {
      for (Path p : (Iterable<Path>) files::iterator) {
        String name = p.getFileName().toString();
        if (!name.endsWith(SUFFIX)) {
          StorageLayout.deleteQuietly(p); // a record whose write was cut short
          continue;
        }
        String[] lines = Files.readString(p, StandardCharsets.UTF_8).split("\n", -1);
        if (lines.length < 2 || lines[0].isBlank() || lines[1].isBlank()) {
          log.warn("ignoring unreadable upload record {}", p);
          StorageLayout.deleteQuietly(p);
          continue;
        }
        out.add(new Recorded(p, lines[0], lines[1]));
      }
    }
    return out;
  }
}
