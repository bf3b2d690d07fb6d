package io.registrycache.testsupport;

import java.util.List;
import java.util.Random;
import java.util.function.Function;
import java.util.stream.Stream;

/**
 * Generated test input for parameterised tests that check a property over many values: each stream
 * comes from a {@link Random} with a fixed seed, so every run tries the same values and a failure
 * names its value and index.
 */
public final class Generated {

  private Generated() {}

  /**
   * {@code count} values of {@code generator}, drawn from a {@link Random} seeded with {@code
   * seed}.
   */
  public static <T> Stream<T> values(long seed, int count, Function<Random, T> generator) {
    Random random = new Random(seed);
    return Stream.generate(() -> generator.apply(random)).limit(count);
  }

  /** 0 to {@code maxTokens} of {@code tokens}, each picked at random, joined. */
  public static String tokens(Random random, List<String> tokens, int maxTokens) {
    StringBuilder out = new StringBuilder();
    for (int i = random.nextInt(maxTokens + 1); i > 0; i--) {
      out.append(tokens.get(random.nextInt(tokens.size())));
    }
    return out.toString();
  }

  /**
   * {@code min} to {@code max} characters, each one of {@code chars} (each listed, not a range).
   */
  public static String of(Random random, String chars, int min, int max) {
    StringBuilder out = new StringBuilder();
    for (int i = min + random.nextInt(max - min + 1); i > 0; i--) {
      out.append(chars.charAt(random.nextInt(chars.length())));
    }
    return out.toString();
  }

  /**
   * 0 to {@code maxLength} characters of any kind: mostly printable ASCII, but also controls, NUL,
   * Latin-1, other BMP characters and lone surrogates.
   */
  public static String any(Random random, int maxLength) {
    return any(random, 0, maxLength);
  }

  /** {@link #any(Random, int)} with at least {@code minLength} characters. */
  public static String any(Random random, int minLength, int maxLength) {
    StringBuilder out = new StringBuilder();
    for (int i = minLength + random.nextInt(maxLength - minLength + 1); i > 0; i--) {
      out.append(
          switch (random.nextInt(8)) {
            case 0 -> (char) random.nextInt(0x20);
            case 1 -> (char) (0x80 + random.nextInt(0x80));
            case 2 -> (char) random.nextInt(0x10000);
            default -> (char) (0x20 + random.nextInt(0x5f));
          });
    }
    return out.toString();
  }

  /** One of {@code values}, picked at random. */
  @SafeVarargs
  public static <T> T oneOf(Random random, T... values) {
    return values[random.nextInt(values.length)];
  }

  /** {@code min} to {@code max} random bytes. */
  public static byte[] bytes(Random random, int min, int max) {
    byte[] out = new byte[min + random.nextInt(max - min + 1)];
    random.nextBytes(out);
    return out;
  }

  /** A long in {@code [min, max]}. */
  public static long between(Random random, long min, long max) {
    return min + (long) (random.nextDouble() * (max - min + 1));
  }
}
