package io.registrycache.htpasswd;

import java.io.ByteArrayOutputStream;
import java.io.Console;
import java.io.IOException;
import java.io.InputStream;
import java.io.PrintStream;
import java.io.PrintWriter;
import java.nio.charset.StandardCharsets;
import java.util.Arrays;
import java.util.concurrent.Callable;
import java.util.regex.Pattern;
import org.springframework.security.crypto.bcrypt.BCryptPasswordEncoder;
import org.springframework.security.crypto.bcrypt.BCryptPasswordEncoder.BCryptVersion;
import picocli.CommandLine;
import picocli.CommandLine.Command;
import picocli.CommandLine.Model.CommandSpec;
import picocli.CommandLine.Option;
import picocli.CommandLine.ParameterException;
import picocli.CommandLine.Spec;

/**
 * The service jar's {@code htpasswd} subcommand: writes one line of an htpasswd file for {@code
 * registry-cache.auth.htpasswd-file}, {@code <user>:<bcrypt hash>} ({@code $2y$}, as Apache's
 * {@code htpasswd -B} writes it), to standard output, so no other package is needed:
 *
 * <pre>
 * printf '%s\n' "$PASSWORD" | java -jar registry-cache.jar htpasswd --user alice --password-stdin >> users.htpasswd
 * </pre>
 *
 * <p>Options: {@code --user <name>} (required; no {@code :}, blanks or control characters); {@code
 * --password-stdin} (read the password from the first line of standard input; without it the
 * password is asked twice on the terminal, never taken as an argument, where {@code ps} and the
 * shell history would show it); {@code --cost <4..31>} (bcrypt's cost, 2^cost rounds; default
 * {@value #DEFAULT_COST}, Spring Security's default: about 0.1 s per check on a current core, and
 * the service checks a user's password once, then remembers the result). Exit status 0; 2 on wrong
 * options or a refused password (empty, or over bcrypt's {@value #MAX_PASSWORD_BYTES} bytes, which
 * bcrypt would cut off silently), with one line on standard error; 1 when standard input cannot be
 * read. The hash comes from Spring Security's {@link BCryptPasswordEncoder}.
 */
@Command(
    name = "htpasswd",
    description = "Writes one htpasswd line, <user>:<bcrypt hash>, to standard output.")
public final class HtpasswdCommand implements Callable<Integer> {

  /** bcrypt uses the first 72 bytes of a password and ignores the rest. */
  static final int MAX_PASSWORD_BYTES = 72;

  static final int DEFAULT_COST = 10;

  private static final Pattern USER = Pattern.compile("[^:\\s\\p{Cntrl}]+");

  @Option(names = "--user", required = true, paramLabel = "<name>", description = "the user name")
  String user;

  @Option(
      names = "--password-stdin",
      description = "read the password from the first line of standard input")
  boolean passwordStdin;

  @Option(
      names = "--cost",
      paramLabel = "<4..31>",
      defaultValue = "" + DEFAULT_COST,
      description = "bcrypt cost (2^cost rounds); default ${DEFAULT-VALUE}")
  int cost;

  @Spec CommandSpec spec;

  private final InputStream in;
  private final PrintStream out;
  private final Console console;

  HtpasswdCommand(InputStream in, PrintStream out, Console console) {
    this.in = in;
    this.out = out;
    this.console = console;
  }

  /**
   * Runs the subcommand with the process's standard streams and terminal; exits with its status.
   */
  public static void main(String[] args) {
    System.exit(run(args, System.in, System.out, System.err, System.console()));
  }

  /**
   * {@link #main} without exiting (for tests).
   *
   * @param console the terminal to ask for the password on, {@code null} for none
   * @return the exit status: 0, 1 when standard input cannot be read, 2 on wrong options or a
   *     refused password
   */
  static int run(String[] args, InputStream in, PrintStream out, PrintStream err, Console console) {
    CommandLine line =
        new CommandLine(new HtpasswdCommand(in, out, console))
            .setOut(new PrintWriter(out, true, out.charset()))
            .setErr(new PrintWriter(err, true, err.charset()));
    line.setParameterExceptionHandler(
        (e, arguments) -> {
          err.println("htpasswd: " + e.getMessage());
          return 2;
        });
    line.setExecutionExceptionHandler(
        (e, command, parsed) -> {
          err.println("htpasswd: " + e.getMessage());
          return e instanceof IOException ? 1 : 2;
        });
    return line.execute(args);
  }

  @Override
  public Integer call() throws IOException {
    if (!USER.matcher(user).matches()) {
      throw new ParameterException(
          spec.commandLine(),
          "the user name must not be empty or hold ':', blanks or control characters");
    }
    if (cost < 4 || cost > 31) {
      throw new ParameterException(spec.commandLine(), "--cost must be 4 to 31, not " + cost);
    }
    byte[] password = passwordStdin ? firstLine(in) : fromTerminal();
    try {
      if (password.length == 0) {
        throw new ParameterException(spec.commandLine(), "the password is empty");
      }
      if (password.length > MAX_PASSWORD_BYTES) {
        throw new ParameterException(
            spec.commandLine(),
            "the password is "
                + password.length
                + " bytes long (UTF-8); bcrypt uses at most "
                + MAX_PASSWORD_BYTES
                + ": choose a shorter one");
      }
      String hash =
          new BCryptPasswordEncoder(BCryptVersion.$2Y, cost)
              .encode(new String(password, StandardCharsets.UTF_8));
      out.println(user + ":" + hash);
      out.flush();
      return 0;
    } finally {
      Arrays.fill(password, (byte) 0);
    }
  }

  /** Standard input up to its first line break (LF or CRLF) or its end. */
  private static byte[] firstLine(InputStream in) throws IOException {
    ByteArrayOutputStream line = new ByteArrayOutputStream();
    for (int b = in.read(); b != -1 && b != '\n'; b = in.read()) {
      line.write(b);
    }
    byte[] bytes = line.toByteArray();
    int length =
        bytes.length > 0 && bytes[bytes.length - 1] == '\r' ? bytes.length - 1 : bytes.length;
    return Arrays.copyOf(bytes, length);
  }

  private byte[] fromTerminal() {
    if (console == null) {
      throw new ParameterException(
          spec.commandLine(), "no terminal to ask for the password on: give --password-stdin");
    }
    char[] first = console.readPassword("Password for %s: ", user);
    char[] second = console.readPassword("Again: ");
    try {
      if (first == null || second == null || !Arrays.equals(first, second)) {
        throw new ParameterException(spec.commandLine(), "the two passwords differ");
      }
      return new String(first).getBytes(StandardCharsets.UTF_8);
    } finally {
      if (first != null) {
        Arrays.fill(first, ' ');
      }
      if (second != null) {
        Arrays.fill(second, ' ');
      }
    }
  }
}
