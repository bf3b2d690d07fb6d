package io.registrycache.oci;

import static org.assertj.core.api.Assertions.assertThat;

import io.registrycache.testsupport.Generated;
import java.util.List;
import java.util.Random;
import java.util.regex.Pattern;
import java.util.stream.Stream;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.MethodSource;

/**
 * The hand-written grammars accept exactly what the specs' regular expressions accept (the
 * expressions live here only, as the oracle), over strings built from the characters and separators
 * that matter, so that near-valid input is common.
 */
class GrammarTest {

  private static final Pattern COMPONENT =
      Pattern.compile("[a-z0-9]+(?:(?:\\.|_|__|-+)[a-z0-9]+)*");
  private static final Pattern TAG = Pattern.compile("[a-zA-Z0-9_][a-zA-Z0-9._-]{0,127}");
  private static final Pattern DIGEST =
      Pattern.compile("[a-z0-9]+(?:[+._-][a-z0-9]+)*:[a-zA-Z0-9=_-]+");
  private static final Pattern HEX = Pattern.compile("[a-f0-9]+");

  private static final List<String> TOKENS =
      List.of(
          "a", "z", "0", "9", "ab", "Q", "F", "f", "e3", ".", "..", "_", "__", "___", "-", "--",
          "+", ":", "=", "/", " ", "\n", "é", "sha256", "sha512");

  /** Tokens joined; characters of the grammars; or {@code <tokens>:<tokens>}, a digest's shape. */
  private static String nearValid(Random random) {
    return switch (random.nextInt(3)) {
      case 0 -> Generated.tokens(random, TOKENS, 12);
      case 1 -> Generated.of(random, "az09AZ._-+:=/", 0, 140);
      default -> Generated.tokens(random, TOKENS, 4) + ":" + Generated.tokens(random, TOKENS, 4);
    };
  }

  static Stream<String> nearValid() {
    return Generated.values(20_241, 3000, GrammarTest::nearValid);
  }

  static Stream<String> longTags() {
    return Generated.values(20_242, 500, r -> Generated.of(r, "aZ0_.-", 125, 131));
  }

  @Test
  void theGeneratedValuesHoldBothAnswersOfEveryExpression() {
    List<String> values = nearValid().toList();
    for (Pattern oracle : List.of(COMPONENT, TAG, DIGEST, HEX)) {
      long accepted = values.stream().filter(v -> oracle.matcher(v).matches()).count();
      assertThat(accepted).as(oracle.pattern()).isBetween(10L, values.size() - 10L);
    }
  }

  @ParameterizedTest(name = "[{index}]")
  @MethodSource("nearValid")
  void nameComponentsAsTheSpecExpression(String value) {
    assertThat(Grammar.nameComponent(value, 0, value.length()))
        .as(value)
        .isEqualTo(COMPONENT.matcher(value).matches());
  }

  @ParameterizedTest(name = "[{index}]")
  @MethodSource("nearValid")
  void tagsAsTheSpecExpression(String value) {
    assertThat(Grammar.tag(value)).as(value).isEqualTo(TAG.matcher(value).matches());
  }

  @ParameterizedTest(name = "[{index}]")
  @MethodSource("longTags")
  void tagsAroundTheLengthLimit(String value) {
    assertThat(Grammar.tag(value)).as(value).isEqualTo(TAG.matcher(value).matches());
  }

  @ParameterizedTest(name = "[{index}]")
  @MethodSource("nearValid")
  void digestsAsTheSpecExpression(String value) {
    assertThat(Grammar.digest(value)).as(value).isEqualTo(DIGEST.matcher(value).matches());
  }

  @ParameterizedTest(name = "[{index}]")
  @MethodSource("nearValid")
  void lowerHexAsTheExpression(String value) {
    assertThat(Grammar.lowerHex(value)).as(value).isEqualTo(HEX.matcher(value).matches());
  }

  @ParameterizedTest(name = "[{index}]")
  @MethodSource("nearValid")
  void componentsInsideALongerString(String value) {
    String framed = "x/" + value + "/y";
    assertThat(Grammar.nameComponent(framed, 2, 2 + value.length()))
        .as(value)
        .isEqualTo(COMPONENT.matcher(value).matches());
  }
}
