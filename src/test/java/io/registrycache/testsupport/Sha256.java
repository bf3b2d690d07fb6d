package io.registrycache.testsupport;

import java.io.IOException;
import java.io.InputStream;
import java.io.UncheckedIOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.util.HexFormat;

/** sha256 helpers for tests, independent of the production {@code Digest} class. */
public final class Sha256 {

  private Sha256() {}

  /** A fresh SHA-256 {@link MessageDigest}. */
  public static MessageDigest newDigest() {
    try {
      return MessageDigest.getInstance("SHA-256");
    } catch (NoSuchAlgorithmException e) {
      throw new IllegalStateException(e);
    }
  }

  /** Lowercase hex of the sha256 of {@code bytes}. */
  public static String hex(byte[] bytes) {
    return HexFormat.of().formatHex(newDigest().digest(bytes));
  }

  /** {@code sha256:<hex>} of {@code bytes}. */
  public static String digest(byte[] bytes) {
    return "sha256:" + hex(bytes);
  }

  /** {@code sha256:<hex>} of everything {@code in} yields; closes the stream. */
  public static String digest(InputStream in) throws IOException {
    MessageDigest md = newDigest();
    try (in) {
      byte[] buffer = new byte[64 * 1024];
      int n;
      while ((n = in.read(buffer)) >= 0) {
        md.update(buffer, 0, n);
      }
    }
    return "sha256:" + HexFormat.of().formatHex(md.digest());
  }

  /** {@code sha256:<hex>} of a file's content. */
  public static String digest(Path file) {
    try {
      return digest(Files.newInputStream(file));
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
  }

  /** The hex part of {@code sha256:<hex>}. */
  public static String hexOf(String digest) {
    if (!digest.startsWith("sha256:")) {
      throw new IllegalArgumentException("not a sha256 digest: " + digest);
    }
    return digest.substring("sha256:".length());
  }
}
